"""What sharing state costs: the SQLite backend beside the memory one, in one run.

Three measurements, each printed as the median of ``--reps`` repetitions with their spread:

1. tasks in process: create a task (a tool that returns at once) and read it back with one
   ``tasks/get``, sequentially through the in-process test client: memory, SQLite and
   PostgreSQL (a throwaway cluster the bench starts, Unix socket, as the tests do);
2. cross-worker cancel latency: two runs of one server on one shared store (two workers in
   one process, each with its own backend handle and signal watcher); a task runs on A,
   ``tasks/cancel`` goes to B; the latency is request sent on B -> ``trio.Cancelled``
   delivered in the task's scope on A (and, beside it, the same cancel sent to A itself);
   ``tasks/get`` latency with 10, 1,000 and 100,000 tasks stored, and task creation's
   with 10, 1,000, 9,000 and 90,000 stored (each creation checks the limits);
   the same on PostgreSQL at a distance (``--distance``, 0.5 ms a round trip by default,
   through ``slow_proxy.py``): a creation's p50 and tasks created and read back per second;
3. plain ``tools/call`` over HTTP with wrk (conc 16) against the conformance fixture under
   ``hypercorn --worker-class trio``, ``--workers 1`` and ``--workers 2``, each with the
   memory backend and with SQLite shared, to show what non-task requests pay for sharing.

    PYTHONPATH=. .venv/bin/python bench/backend_bench.py            # all three, 3 reps
    PYTHONPATH=. .venv/bin/python bench/backend_bench.py --skip-http
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the wrk harness beside this file
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # a throwaway cluster

import http_bench
import psycopg
from support.postgres_cluster import PORT, Cluster, running_cluster

from presa_trio import Server
from presa_trio.backends import parse_url
from presa_trio.ext.tasks import Status, TaskLimits, TaskRecord, TasksExtension
from presa_trio.ext.tasks._sql_store import RECOUNT, encode
from presa_trio.testing import open_client

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def spread(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):,.1f} (min {min(values):,.1f}, max {max(values):,.1f})"
    )


# ------------------------------------------------------------------ 1: tasks in process


UNLIMITED = TaskLimits(None, None, None)


def task_server(cancelled_at: list[float] | None = None, limits: TaskLimits = UNLIMITED) -> Server:
    server = Server("bench", "1")
    server.add_extension(TasksExtension(poll_interval_ms=10, limits=limits))

    @server.tool(options={"tasks": "optional"})
    async def quick() -> str:
        """Returns at once."""
        await trio.lowlevel.checkpoint()
        return "done"

    @server.tool(options={"tasks": "optional"})
    async def sleeper() -> str:
        """Sleeps until cancelled; notes when the cancellation arrived."""
        try:
            await trio.sleep(3600)
        except trio.Cancelled:
            if cancelled_at is not None:
                cancelled_at.append(time.perf_counter())
            raise
        return "woke"

    return server


async def create_and_get(url: str, count: int) -> tuple[float, float]:
    """Tasks created and read back per second, and this process's CPU per task (microseconds,
    worker threads included, the database server's not) until the last one has completed."""
    server = task_server()
    async with open_client(server.asgi_app(backend=url), capabilities=TASKS) as client:
        await client.get_task(await client.create_task("quick"))  # warm: tables, caches
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            task = await client.get_task(await client.create_task("quick"))
        rate = count / (time.perf_counter() - started)
        with trio.fail_after(10):
            while task["status"] != "completed":
                await trio.sleep(0.001)
                task = await client.get_task(task["taskId"])
        return rate, (time.process_time() - cpu) / count * 1e6


# ------------------------------------------------------------------ 2: cancel latency


async def cancel_latencies(
    url: str, samples: int, across: bool, settle: float = 0.005
) -> list[float]:
    """Milliseconds from tasks/cancel sent to Cancelled delivered in the task, sent
    ``settle`` seconds after the task was created (5 ms: running, just; 50 ms: its worker
    has written nothing for a while)."""
    cancelled_at: list[float] = []
    server = task_server(cancelled_at)
    out = []
    async with (
        open_client(server.asgi_app(backend=url), capabilities=TASKS) as a,
        open_client(server.asgi_app(backend=url), capabilities=TASKS) as b,
    ):
        canceller = b if across else a
        for _ in range(samples):
            task_id = await a.create_task("sleeper")
            await trio.sleep(settle)
            cancelled_at.clear()
            sent = time.perf_counter()
            await canceller.cancel_task(task_id)
            out.append((cancelled_at[0] - sent) * 1000)
    return out


async def waiting_cpu(url: str, seconds: float) -> float:
    """This process's CPU, in % of a core, while one task waits (a task keeps its worker
    expecting signals from the others: on SQLite it looks for them)."""
    server = task_server()
    async with open_client(server.asgi_app(backend=url), capabilities=TASKS) as client:
        await client.create_task("sleeper")
        await trio.sleep(0.5)  # settled
        started, cpu = time.perf_counter(), time.process_time()
        await trio.sleep(seconds)
        return (time.process_time() - cpu) / (time.perf_counter() - started) * 100


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ------------------------------------------------------------------ 3: HTTP, workers


def http_runs(args: argparse.Namespace, scratch: Path) -> None:
    body = http_bench.request_body("test_simple_text")
    lua = scratch / "call.lua"
    lua.write_text(
        http_bench.LUA.format(body=body, proto=http_bench.PROTO, tool="test_simple_text")
    )
    sqlite = {"PRESA_STORE": f"sqlite:///{scratch}/bench.db"}
    configs = [
        ("1 worker, memory", 1, {}),
        ("1 worker, sqlite", 1, sqlite),
        ("2 workers, memory", 2, {}),
        ("2 workers, sqlite", 2, sqlite),
    ]
    results: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in configs}
    for rep in range(args.reps):
        # A B C D, then D C B A: drift on a noisy machine hits every server alike
        for label, workers, env in configs if rep % 2 == 0 else configs[::-1]:
            server = http_bench.Server(label.replace(" ", "-").replace(",", ""), "", env)
            server.port = http_bench.free_port()
            # one worker: pinned to CPU 1 with wrk on CPU 0, as http_bench.py does; two
            # workers need both CPUs, and share them with wrk
            server_cpu, wrk_cpu = ("1", "0") if workers == 1 else ("", "")
            start(server, workers, scratch, server_cpu)
            try:
                http_bench.wait_ready(server, body.encode(), "test_simple_text")
                http_bench.wrk(server.url, 16, "2s", 1, lua, wrk_cpu)  # warm-up
                assert server.proc is not None
                cpu0 = http_bench.cpu_seconds(server.proc.pid)
                n, secs, p50, _, bad, errors = http_bench.wrk(
                    server.url, 16, args.duration, 1, lua, ""
                )
                cpu = http_bench.cpu_seconds(server.proc.pid) - cpu0
            finally:
                http_bench.stop(server)
            if int(bad) or int(errors):
                print(f"! {label}: {bad} bad responses, {errors} socket errors", file=sys.stderr)
            results[label].append((int(n) / float(secs), cpu * 1e6 / int(n)))
            print(f"  rep {rep + 1} {label:>20}: {int(n) / float(secs):8.0f} req/s, p50 {p50} ms")
    base = statistics.median(r for r, _ in results["1 worker, memory"])
    print("\ntools/call over HTTP, wrk -c16 (requests/s; server CPU us/request over all workers)")
    for label, runs in results.items():
        rps = [r for r, _ in runs]
        cpu = [c for _, c in runs]
        print(
            f"  {label:>20}: {spread(rps)} req/s, x{statistics.median(rps) / base:.2f} of 1 worker;"
            f" CPU {statistics.median(cpu):.0f} us/req"
        )
    for workers in ("1 worker", "2 workers"):
        memory = results[f"{workers}, memory"]
        shared = results[f"{workers}, sqlite"]
        rps = statistics.median(r for r, _ in shared) / statistics.median(r for r, _ in memory)
        cpu = statistics.median(c for _, c in shared) / statistics.median(c for _, c in memory)
        print(f"  {workers}, sqlite / memory: {rps:.3f} req/s, {cpu:.3f} CPU per request")


def start(server: http_bench.Server, workers: int, logdir: Path, cpu: str) -> None:
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(http_bench.ROOT), **server.env}
    server.log = logdir / f"{server.label}.log"
    command = [
        *http_bench.pin(cpu), sys.executable, "-m", "hypercorn", "--worker-class", "trio",
        "--workers", str(workers), "--bind", f"127.0.0.1:{server.port}",
        "fixtures.conformance:app",
    ]  # fmt: skip
    with server.log.open("wb") as log:
        server.proc = subprocess.Popen(
            command,
            cwd=http_bench.ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


# ------------------------------------------------------------------ main


async def get_latencies(url: str, stored: int, samples: int) -> list[float]:
    """Milliseconds per tasks/get with ``stored`` tasks in the store (bulk-loaded)."""
    server = task_server()
    async with open_client(server.asgi_app(backend=url), capabilities=TASKS) as client:
        task_id = await client.create_task("quick")
        await trio.to_thread.run_sync(bulk_load, url, stored)
        out = []
        for _ in range(samples):
            started = time.perf_counter()
            await client.get_task(task_id)
            out.append((time.perf_counter() - started) * 1000)
    return out


async def create_latencies(url: str, stored: int, samples: int) -> list[float]:
    """Milliseconds per task creation with ``stored`` tasks of another principal in the
    store, under the default ``TaskLimits`` (so every creation counts what is stored), with
    ``max_tasks`` raised to 100,000 where the default 10,000 would refuse."""
    limits = TaskLimits() if stored < 9_500 else TaskLimits(max_tasks=100_000)
    server = task_server(limits=limits)
    async with open_client(server.asgi_app(backend=url), capabilities=TASKS) as client:
        await client.create_task("quick")  # the tables exist
        await trio.to_thread.run_sync(bulk_load, url, stored)
        out = []
        for _ in range(samples):
            started = time.perf_counter()
            await client.create_task("quick")
            out.append((time.perf_counter() - started) * 1000)
    return out


def bulk_load(url: str, count: int) -> None:
    """``count`` finished tasks of another principal, written straight into the table (and
    the store's total counted afresh, as its sweep does)."""
    rows = []
    for n in range(count):
        record = TaskRecord(
            f"bulk-{n}", "someone else", "quick", Status.COMPLETED, 1, 1, None, None
        )
        rows.append((record.task_id, record.principal, "", 1, 1, None, encode(record)))
    insert = "INSERT INTO presa_tasks VALUES (?, ?, ?, ?, ?, ?, ?)"
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        with sqlite3.connect(parsed.path) as db:
            db.executemany(insert, rows)
            db.execute(RECOUNT)
    else:
        with psycopg.connect(parsed.path) as db, db.cursor() as cursor:
            cursor.executemany(insert.replace("?", "%s"), rows)
            cursor.execute(RECOUNT)


def stores(args: argparse.Namespace, scratch: Path, new_pg: Callable[[], str]) -> None:
    counter = iter(range(10**6))

    def sqlite_url() -> str:
        return f"sqlite:///{scratch}/tasks-{next(counter)}.db"

    def pg_url() -> str:
        return new_pg() + "&lease=20"

    makers = {"memory": lambda: "memory:", "sqlite": sqlite_url, "postgresql": pg_url}
    rates: dict[str, list[float]] = {name: [] for name in makers}
    cpus: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(args.reps):  # interleaved: the machine's noise hits all alike
        for name, make in makers.items():
            rate, cpu = trio.run(create_and_get, make(), args.tasks)
            rates[name].append(rate)
            cpus[name].append(cpu)
    print(f"\ntask create + tasks/get, in process ({args.tasks} per rep, sequential)")
    for name, values in rates.items():
        ratio = statistics.median(values) / statistics.median(rates["memory"])
        print(f"  {name:>10}: {spread(values)} tasks/s, x{ratio:.3f} of memory")
    print("  CPU of this process per task, us (the database server's not counted)")
    for name, values in cpus.items():
        print(f"  {name:>10}: {spread(values)}")

    print(f"\ntasks/cancel -> Cancelled in the task's scope, ms ({args.samples} per rep)")
    cases = (
        ("same worker", False, 0.005),
        ("another worker", True, 0.005),
        ("another, 50 ms quiet", True, 0.05),
    )
    for name, make in (("sqlite", sqlite_url), ("postgresql", pg_url)):
        for label, across, settle in cases:
            p50s, p99s = [], []
            for _ in range(args.reps):
                values = trio.run(cancel_latencies, make(), args.samples, across, settle)
                p50s.append(percentile(values, 0.5))
                p99s.append(percentile(values, 0.99))
            print(f"  {name:>10}, {label:>20}: p50 {spread(p50s)}; p99 {spread(p99s)}")

    print(f"\nCPU of this process while one task waits, % of a core ({args.idle:g} s per rep)")
    for name, make in makers.items():
        shares = [trio.run(waiting_cpu, make(), args.idle) for _ in range(args.reps)]
        print(f"  {name:>10}: {spread(shares)}")

    print("\ntasks/get with N tasks stored, ms (p50 / p99 of 200 gets, median of reps)")
    by_stored(args, sqlite_url, pg_url, get_latencies, (10, 1_000, 100_000))
    print(
        "\ntask creation with N tasks stored, default limits (max_tasks 100,000 at 90,000), ms "
        "(p50 / p99 of 200 creations, median of reps)"
    )
    by_stored(args, sqlite_url, pg_url, create_latencies, (10, 1_000, 9_000, 90_000))


def distant(args: argparse.Namespace, cluster: Cluster) -> None:
    """A creation's p50 and tasks created and read back per second, with the database
    behind ``slow_proxy.py``: each round trip ``args.distance`` ms longer (and the proxy's
    own hops), as for a database on another host."""
    port = http_bench.free_port()
    proxy = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve().parent / "slow_proxy.py"),
            str(port),
            str(cluster.base / f".s.PGSQL.{PORT}"),
            str(args.distance / 2000),
        ]
    )
    try:
        trio.run(accepting, port)

        def far() -> str:
            local = f"host={cluster.base}&port={PORT}"
            return cluster.new_database().replace(local, f"host=127.0.0.1&port={port}")

        p50s, rates = [], []
        for _ in range(args.reps):
            p50s.append(percentile(trio.run(create_latencies, far(), 10, 200), 0.5))
            rates.append(trio.run(create_and_get, far() + "&lease=20", args.tasks)[0])
    finally:
        proxy.kill()
        proxy.wait()
    print(f"\nPostgreSQL {args.distance:g} ms a round trip away (slow_proxy.py)")
    print(f"  task creation, 10 stored, p50 ms: {spread(p50s)}")
    print(f"  task create + tasks/get, tasks/s: {spread(rates)}")


async def accepting(port: int) -> None:
    """Until something accepts connections on 127.0.0.1:``port`` (10 s at most)."""
    with trio.fail_after(10):
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.05)
            else:
                await stream.aclose()
                return


def by_stored(
    args: argparse.Namespace,
    sqlite_url: Callable[[], str],
    pg_url: Callable[[], str],
    measure: Callable[[str, int, int], Awaitable[list[float]]],
    sizes: tuple[int, ...],
) -> None:
    for name, make in (("sqlite", sqlite_url), ("postgresql", pg_url)):
        for stored in sizes:
            p50s, p99s = [], []
            for _ in range(args.reps):
                values = trio.run(measure, make(), stored, 200)
                p50s.append(percentile(values, 0.5))
                p99s.append(percentile(values, 0.99))
            print(
                f"  {name:>10}, {stored:>7,} stored: p50 {statistics.median(p50s):.2f}, "
                f"p99 {statistics.median(p99s):.2f}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=300, help="tasks per rep (create + get)")
    parser.add_argument("--samples", type=int, default=200, help="cancels per rep")
    parser.add_argument("--duration", default="5s", help="wrk -d per HTTP run")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds a task waits per rep")
    parser.add_argument(
        "--distance", type=float, default=0.5, help="ms a round trip to PostgreSQL (0: skip)"
    )
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args()
    print(f"presa_trio backend bench, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    with tempfile.TemporaryDirectory() as scratch_dir, running_cluster() as cluster:
        scratch = Path(scratch_dir)
        stores(args, scratch, cluster.new_database)
        if args.distance:
            distant(args, cluster)
        if not args.skip_http:
            http_runs(args, scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
