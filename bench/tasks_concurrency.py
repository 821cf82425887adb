"""Tasks on every backend under concurrency, over HTTP: N clients each create a task, poll it
to a terminal status with ``tasks/get`` and read its result, again and again.

The server is ``bench/tasks_app.py`` under ``hypercorn --worker-class trio --workers 2`` (a
fresh server and a fresh store for every run): on the memory backend, SQLite (a file),
PostgreSQL on a local Unix socket and PostgreSQL behind ``slow_proxy.py`` (``--distance`` ms
a round trip), the last two in a throwaway cluster the bench starts. Each client keeps one
keep-alive connection, so its requests all reach the worker that accepted it: on the memory
backend, where the two workers share nothing, a client therefore always finds its tasks. The
clients' connections are spread evenly over the workers (a connection that lands on a worker
that has its share already is closed and made again), as a load balancer would spread them.

Per run: tasks/s, p50/p99 of a creation (the ``tools/call``'s round trip) and of the time to
terminal (the creation sent to the terminal ``tasks/get`` read), server CPU per task (user
and system time of hypercorn's master and workers, from ``/proc``), ``tasks/get`` per task,
and on SQL stores the database's work per task (``presa_trio._backends.tally``, set on in
each worker by the app's ``tally`` tool: calls, write transactions, statements, and the
signal watchers' looks). Runs are interleaved (every store at one client count, then the
next count; each repetition in the opposite order of the one before), and each figure is
the median of ``--reps`` runs with the lowest and highest beside it; ratios to memory are
taken within a repetition, then their median. Not measured: parked tasks, cancellation,
listen streams, more than one host.

    PYTHONPATH=. .venv/bin/python bench/tasks_concurrency.py               # about 5 min
    PYTHONPATH=. .venv/bin/python bench/tasks_concurrency.py --clients 64 --reps 1 --seconds 3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness beside this file
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # a throwaway cluster

import http_bench
from support.postgres_cluster import PORT, Cluster, running_cluster

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
    "io.modelcontextprotocol/clientInfo": {"name": "tasks-concurrency", "version": "1"},
}
TERMINAL = frozenset({"completed", "failed", "cancelled"})
EXCHANGE_TIMEOUT = 30.0  # bound on one HTTP exchange


class BenchError(Exception):
    """An answer the bench did not expect (not a task, an error, a bad result)."""


# ---------------------------------------------------------------------- a lean client


class Connection:
    """One keep-alive HTTP/1.1 connection to the server: a request out, its answer (a
    JSON body with a content length, as the server sends for these requests) read back."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stream: trio.SocketStream | None = None
        self.buffer = b""
        self.next_id = 0

    async def aclose(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def rpc(self, method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        body = json.dumps({**message, "params": {**params, "_meta": META}}).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\n"
            "content-type: application/json\r\naccept: application/json, text/event-stream\r\n"
            f"mcp-protocol-version: {VERSION}\r\nmcp-method: {method}\r\nmcp-name: {name}\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        with trio.fail_after(EXCHANGE_TIMEOUT):
            if self.stream is None:
                self.stream = await trio.open_tcp_stream("127.0.0.1", self.port)
            await self.stream.send_all(head.encode() + body)
            status, payload = await self._response(self.stream)
        answer: dict[str, Any] = json.loads(payload)
        if status != 200 or "result" not in answer:
            raise BenchError(f"{method}: HTTP {status} {payload[:300]!r}")
        return answer["result"]  # type: ignore[no-any-return]

    async def _response(self, stream: trio.SocketStream) -> tuple[int, bytes]:
        while b"\r\n\r\n" not in self.buffer:
            await self._more(stream)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = dict(line.split(":", 1) for line in lines[1:])
        fields = {key.strip().lower(): value.strip() for key, value in headers.items()}
        if "content-length" not in fields:
            raise BenchError(f"an answer without a content length: {head!r}")
        size = int(fields["content-length"])
        while len(self.buffer) < size:
            await self._more(stream)
        payload, self.buffer = self.buffer[:size], self.buffer[size:]
        return status, payload

    async def _more(self, stream: trio.SocketStream) -> None:
        data = await stream.receive_some(65536)
        if not data:
            raise BenchError("the server closed the connection")
        self.buffer += data


@dataclass
class Load:
    """What the clients of one run saw."""

    tasks: int = 0
    gets: int = 0
    creations: list[float] = field(default_factory=list)  # seconds
    terminals: list[float] = field(default_factory=list)
    workers: Counter[int] = field(default_factory=Counter)  # connections per worker pid
    errors: list[str] = field(default_factory=list)


async def one_task(conn: Connection, load: Load, measured: bool) -> None:
    sent = time.perf_counter()
    created = await conn.rpc("tools/call", {"name": "quick", "arguments": {}}, "quick")
    answered = time.perf_counter()
    if created.get("resultType") != "task":
        raise BenchError(f"not a task: {created}")
    task_id, task = created["taskId"], created
    while task["status"] not in TERMINAL:
        await trio.sleep(task["pollIntervalMs"] / 1000)
        task = await conn.rpc("tasks/get", {"taskId": task_id}, task_id)
        load.gets += measured
    done = time.perf_counter()
    if task["status"] != "completed" or task["result"]["content"][0]["text"] != "done":
        raise BenchError(f"task {task_id} ended {task}")
    if measured:
        load.tasks += 1
        load.creations.append(answered - sent)
        load.terminals.append(done - sent)


async def balanced(port: int, load: Load, share: int) -> Connection:
    """A connection to a worker that holds fewer than ``share`` of the clients' connections:
    the kernel hands each new connection to whichever worker accepts first, which can leave
    one worker with most of them (a load balancer in front would spread them)."""
    for _ in range(200):
        conn = Connection(port)
        whoami = await conn.rpc("tools/call", {"name": "whoami", "arguments": {}}, "whoami")
        pid = whoami["structuredContent"]["result"]
        if load.workers[pid] < share:
            load.workers[pid] += 1
            return conn
        await conn.aclose()
    raise BenchError("no worker with room for another connection after 200 tries")


async def client(port: int, load: Load, share: int, warm_until: float, until: float) -> None:
    conn: Connection | None = None
    try:
        conn = await balanced(port, load, share)
        while (now := time.perf_counter()) < until:
            await one_task(conn, load, measured=now >= warm_until)
    except (BenchError, OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
        load.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        if conn is not None:
            await conn.aclose()


async def tallies(port: int) -> dict[int, dict[str, int]]:
    """Each worker's database counts (``tally``), asked on fresh connections until both
    workers answered (a new connection goes to whichever worker accepts it)."""
    seen: dict[int, dict[str, int]] = {}
    with trio.fail_after(20):
        while len(seen) < 2:
            conn = Connection(port)
            try:
                result = await conn.rpc("tools/call", {"name": "tally", "arguments": {}}, "tally")
            finally:
                await conn.aclose()
            counts = result["structuredContent"]
            seen[counts["pid"]] = counts
    return seen


async def drive(port: int, clients: int, workers: int, seconds: float) -> Load:
    load = Load()
    share = -(-clients // workers)
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(client, port, load, share, start, start + seconds)
    return load


# ---------------------------------------------------------------------- one run


@dataclass
class Run:
    store: str
    clients: int
    rate: float
    creation: tuple[float, float]  # p50, p99 ms
    terminal: tuple[float, float]
    cpu_us: float
    gets: float
    database: dict[str, float]  # per task
    split: list[int]
    errors: list[str]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def start_server(url: str, port: int, logdir: Path, workers: int) -> http_bench.Server:
    label = f"tasks-{len(list(logdir.glob('*.log')))}"
    server = http_bench.Server(label, "bench.tasks_app:app", {"PRESA_STORE": url})
    server.port = port
    server.log = logdir / f"{label}.log"
    env = {**os.environ, "PYTHONPATH": str(http_bench.ROOT), **server.env}
    command = [
        sys.executable, "-m", "hypercorn", "--worker-class", "trio", "--workers", str(workers),
        "--bind", f"127.0.0.1:{port}", server.app,
    ]  # fmt: skip
    with server.log.open("wb") as log:
        server.proc = subprocess.Popen(
            command, cwd=http_bench.ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    return server


def ready_body() -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    params = {"name": "whoami", "arguments": {}, "_meta": META}
    return json.dumps({**message, "params": params}).encode()


def one_run(store: str, url: str, clients: int, args: argparse.Namespace, logdir: Path) -> Run:
    port = http_bench.free_port()
    server = start_server(url, port, logdir, args.workers)
    try:
        http_bench.wait_ready(server, ready_body(), "whoami")
        shared = store != "memory"
        trio.run(drive, port, clients, args.workers, args.warm)  # warm: tables, caches, connections
        before = trio.run(tallies, port) if shared else {}
        assert server.proc is not None
        cpu0 = http_bench.cpu_seconds(server.proc.pid)
        load = trio.run(drive, port, clients, args.workers, args.seconds)
        cpu = http_bench.cpu_seconds(server.proc.pid) - cpu0
        after = trio.run(tallies, port) if shared else {}
    finally:
        http_bench.stop(server)
    if load.errors and server.log is not None:
        log = server.log.read_text(errors="replace")[-3000:]
        print(f"! {store} c{clients}: {len(load.errors)} errors; the server's log:\n{log}")
    total = load.tasks
    database: dict[str, float] = {}
    for key in ("calls", "writes", "statements", "looks"):
        done = sum(after[pid][key] - before.get(pid, {}).get(key, 0) for pid in after)
        database[key] = done / total if shared and total else 0.0
    return Run(
        store, clients, load.tasks / args.seconds,
        (percentile(load.creations, 0.5) * 1e3, percentile(load.creations, 0.99) * 1e3),
        (percentile(load.terminals, 0.5) * 1e3, percentile(load.terminals, 0.99) * 1e3),
        cpu * 1e6 / total if total else float("nan"),
        load.gets / load.tasks if load.tasks else float("nan"),
        database, sorted(load.workers.values()), load.errors,
    )  # fmt: skip


# ---------------------------------------------------------------------- stores


@contextmanager
def far_proxy(cluster: Cluster, distance_ms: float) -> Iterator[int]:
    """``slow_proxy.py`` in front of the cluster's socket; its port."""
    port = http_bench.free_port(3300, 3399)
    proxy = subprocess.Popen(
        [
            sys.executable, str(Path(__file__).resolve().parent / "slow_proxy.py"), str(port),
            str(cluster.base / f".s.PGSQL.{PORT}"), str(distance_ms / 2000),
        ]
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with __import__("socket").create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield port
    finally:
        proxy.kill()
        proxy.wait()


def store_makers(
    names: list[str], scratch: Path, cluster: Cluster | None, far_port: int | None
) -> dict[str, Callable[[], str]]:
    counter = iter(range(10**6))
    makers: dict[str, Callable[[], str]] = {}
    for name in names:
        if name == "memory":
            makers[name] = lambda: "memory:"
        elif name == "sqlite":
            makers[name] = lambda: f"sqlite:///{scratch}/tasks-{next(counter)}.db"
        elif name == "postgresql":
            assert cluster is not None
            makers[name] = cluster.new_database
        elif name == "postgresql-far":
            assert cluster is not None and far_port is not None
            makers[name] = partial(far_database, cluster, far_port)
        else:
            raise SystemExit(f"unknown store {name!r}")
    return makers


def far_database(cluster: Cluster, port: int) -> str:
    """A fresh database of ``cluster``, reached through the proxy on ``port``."""
    local, far = f"host={cluster.base}&port={PORT}", f"host=127.0.0.1&port={port}"
    return cluster.new_database().replace(local, far)


# ---------------------------------------------------------------------- report


def spread(values: list[float], digits: int = 1) -> str:
    return (
        f"{statistics.median(values):,.{digits}f} "
        f"({min(values):,.{digits}f}-{max(values):,.{digits}f})"
    )


def report(runs: list[Run], stores: list[str], counts: list[int]) -> None:
    print("\nMedian of the runs (lowest-highest); ratios to memory taken within a repetition")
    for clients in counts:
        print(f"\n{clients} concurrent client(s)")
        memory = [r for r in runs if r.store == "memory" and r.clients == clients]
        for store in stores:
            mine = [r for r in runs if r.store == store and r.clients == clients]
            if not mine:
                continue
            line = [
                f"  {store:>15}: {spread([r.rate for r in mine])} tasks/s",
                f"creation p50 {spread([r.creation[0] for r in mine], 2)} ms"
                f" p99 {spread([r.creation[1] for r in mine], 2)} ms",
                f"terminal p50 {spread([r.terminal[0] for r in mine], 2)} ms"
                f" p99 {spread([r.terminal[1] for r in mine], 2)} ms",
                f"server CPU {spread([r.cpu_us for r in mine], 0)} us/task",
                f"gets/task {spread([r.gets for r in mine], 2)}",
            ]
            if memory and store != "memory":
                ratios = [r.rate / m.rate for r, m in zip(mine, memory, strict=False)]
                line.append(f"x memory {spread(ratios, 3)}")
            if store != "memory":
                db = " ".join(
                    f"{key} {statistics.median([r.database[key] for r in mine]):.2f}"
                    for key in ("calls", "writes", "statements", "looks")
                )
                line.append(f"database per task: {db}")
            print("\n    ".join(line))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="memory,sqlite,postgresql,postgresql-far")
    parser.add_argument("--clients", default="1,16,64", help="concurrent clients per run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warm", type=float, default=1.0, help="seconds of warm-up per run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--distance", type=float, default=0.5, help="ms a round trip (far)")
    args = parser.parse_args()
    stores = [name for name in args.stores.split(",") if name]
    counts = [int(c) for c in args.clients.split(",") if c]
    load = os.getloadavg()
    print(
        f"tasks_concurrency {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"{args.workers} workers, {args.seconds:g} s a run after {args.warm:g} s of warm-up"
    )
    # SIGTERM/SIGHUP unwind like Ctrl-C, so the servers, the proxy and the cluster stop
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    needs_cluster = any(name.startswith("postgresql") for name in stores)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="tasks-conc-") as scratch_dir:
        scratch = Path(scratch_dir)
        with (
            running_cluster() if needs_cluster else nullcluster() as cluster,
            far_proxy(cluster, args.distance)
            if "postgresql-far" in stores and cluster is not None
            else nullport() as far_port,
        ):
            makers = store_makers(stores, scratch, cluster, far_port)
            for rep in range(args.reps):
                order = stores if rep % 2 == 0 else stores[::-1]
                for clients in counts:
                    for store in order:
                        run = one_run(store, makers[store](), clients, args, scratch)
                        runs.append(run)
                        print(
                            f"  rep {rep + 1} c{clients:<3} {store:>15}: {run.rate:8.1f} tasks/s"
                            f"  creation p50 {run.creation[0]:6.2f} ms  terminal p50"
                            f" {run.terminal[0]:6.2f} ms  CPU {run.cpu_us:6.0f} us/task"
                            f"  connections per worker {run.split}"
                            + (
                                f"  ERRORS {len(run.errors)}: {run.errors[:2]}"
                                if run.errors
                                else ""
                            ),
                            flush=True,
                        )
    report(runs, stores, counts)
    errors = sum(len(r.errors) for r in runs)
    print(f"\nerrors: {errors}")
    return 1 if errors else 0


@contextmanager
def nullcluster() -> Iterator[Cluster | None]:
    yield None


@contextmanager
def nullport() -> Iterator[int | None]:
    yield None


if __name__ == "__main__":
    sys.exit(main())
