"""presa_trio against its peers over HTTP: the official MCP Python SDK (``mcp`` 2.x) and
FastMCP (with ``fastmcp-tasks``), each served by one hypercorn worker on this machine.

Three paths, each where the peer serves it: a plain 2026-07-28 ``tools/call``; a task
(``tools/call`` declaring the Tasks extension, ``tasks/get`` polled every 5 ms to
``completed``, the result read from it); and the older era (one ``initialize`` session per
client, then its ``tools/call`` at 2025-11-25). The raw ASGI app (``raw_app.py``) answers the
plain call too: it is the ceiling. The servers run under hypercorn's trio worker, except
FastMCP with tasks, which only starts under the asyncio worker (``peer_fastmcp_app.py`` says
why); its plain call is measured there too, beside its trio-worker figure.

Per run: operations/s at ``--clients`` concurrent clients (one keep-alive connection each),
the server's CPU per operation (user and system time of hypercorn's master and worker, from
``/proc``), the client's own (this process's CPU time: well below the raw app's time per
operation, the client is not what limits the servers) and HTTP requests per operation. Then
the resident memory a parked task holds (a task waiting on its client's answer; the worker's
before and after ``--parked`` of them, on a fresh server). Runs are interleaved (every case
in turn, each repetition in the opposite order of the one before); figures are the median
of ``--reps`` with the lowest and highest beside it, and ratios to presa (of throughput and
of CPU) are taken within a repetition. Not measured: several workers, shared stores,
latency under open-loop load.

    PYTHONPATH=. .venv/bin/python bench/peers.py             # about 7 min
    PYTHONPATH=. .venv/bin/python bench/peers.py --quick     # about 20 s, one short run
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness beside this file

import http_bench

MODERN = "2026-07-28"
OLD = "2025-11-25"
TASKS = "io.modelcontextprotocol/tasks"
CLIENT_INFO = {"name": "peers-bench", "version": "1"}
TEXT = "This is a simple text response for testing."
EXCHANGE_TIMEOUT = 30.0  # bound on one HTTP exchange
POLL_S = 0.005  # every peer's tasks are polled this often, whatever interval it advertises
SETTLE_TIMEOUT = 60.0  # bound on waiting for parked tasks to report input_required
READY_TIMEOUT = 60.0  # bound on a server's start


class BenchError(Exception):
    """An answer the bench did not expect."""


def meta(tasks: bool) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"elicitation": {}} if tasks else {}
    if tasks:
        capabilities["extensions"] = {TASKS: {}}
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }


# ---------------------------------------------------------------------- a lean client


class Connection:
    """One keep-alive HTTP/1.1 connection: a JSON-RPC request out, its answer back, whether
    the server sends it as a JSON body or on an event stream, with a content length or
    chunked."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stream: trio.SocketStream | None = None
        self.buffer = bytearray()
        self.next_id = 0
        self.headers: dict[str, str] = {}  # sent with every request (a session's)
        self.version = MODERN

    async def aclose(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def rpc(
        self, method: str, params: dict[str, Any], name: str | None = None
    ) -> dict[str, Any]:
        """Send a request; its ``result`` (an error or anything else raises)."""
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        status, fields, payload = await self.exchange(message, method, name)
        answer = find_answer(fields.get("content-type", ""), payload, self.next_id)
        if status != 200 or answer is None or "result" not in answer:
            raise BenchError(f"{method}: HTTP {status} {bytes(payload[:300])!r}")
        return answer["result"]  # type: ignore[no-any-return]

    async def notify(self, method: str) -> None:
        status, _, payload = await self.exchange({"jsonrpc": "2.0", "method": method}, method)
        if status != 202:
            raise BenchError(f"{method}: HTTP {status} {bytes(payload[:300])!r}")

    async def exchange(
        self, message: dict[str, Any], method: str, name: str | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        body = json.dumps(message, separators=(",", ":")).encode()
        head = [
            "POST /mcp HTTP/1.1",
            f"host: 127.0.0.1:{self.port}",
            "content-type: application/json",
            "accept: application/json, text/event-stream",
            f"mcp-protocol-version: {self.version}",
            f"content-length: {len(body)}",
            *(f"{key}: {value}" for key, value in self.headers.items()),
        ]
        if self.version == MODERN:
            head.append(f"mcp-method: {method}")
            if name is not None:
                head.append(f"mcp-name: {name}")
        with trio.fail_after(EXCHANGE_TIMEOUT):
            if self.stream is None:
                self.stream = await trio.open_tcp_stream("127.0.0.1", self.port)
            await self.stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            status, fields, payload = await self._response(self.stream)
        if fields.get("connection", "").lower() == "close":  # hypercorn's keep-alive limit
            await self.aclose()
            self.buffer.clear()
        return status, fields, payload

    async def _response(self, stream: trio.SocketStream) -> tuple[int, dict[str, str], bytes]:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            await self._more(stream)
        lines = self.buffer[:end].decode("latin-1").split("\r\n")
        del self.buffer[: end + 4]
        status = int(lines[0].split()[1])
        fields = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "content-length" in fields:
            payload = await self._take(stream, int(fields["content-length"]))
        elif fields.get("transfer-encoding", "").lower() == "chunked":
            payload = await self._chunked(stream)
        else:
            raise BenchError(f"an answer with neither a length nor chunks: {lines}")
        return status, fields, payload

    async def _chunked(self, stream: trio.SocketStream) -> bytes:
        payload = bytearray()
        while True:
            while (end := self.buffer.find(b"\r\n")) < 0:
                await self._more(stream)
            size = int(bytes(self.buffer[:end]).split(b";")[0], 16)
            del self.buffer[: end + 2]
            chunk = await self._take(stream, size + 2)  # the chunk and its CRLF
            if size == 0:
                return bytes(payload)
            payload += chunk[:-2]

    async def _take(self, stream: trio.SocketStream, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._more(stream)
        taken = bytes(self.buffer[:size])
        del self.buffer[:size]
        return taken

    async def _more(self, stream: trio.SocketStream) -> None:
        data = await stream.receive_some(65536)
        if not data:
            raise BenchError("the server closed the connection")
        self.buffer += data


def find_answer(content_type: str, payload: bytes, request_id: int) -> dict[str, Any] | None:
    """The JSON-RPC answer to ``request_id`` in a JSON body or an event stream."""
    if content_type.startswith("application/json"):
        answer: dict[str, Any] = json.loads(payload)
        return answer
    for event in payload.split(b"\n\n"):
        data = b"\n".join(
            line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")
        )
        if data:
            message = json.loads(data)
            if isinstance(message, dict) and message.get("id") == request_id:
                return message
    return None


# ---------------------------------------------------------------------- the three paths


async def plain_call(conn: Connection) -> int:
    """One plain call; the requests it took (one)."""
    params = {"name": "test_simple_text", "arguments": {}, "_meta": meta(tasks=False)}
    result = await conn.rpc("tools/call", params, "test_simple_text")
    if result.get("isError") or result["content"][0]["text"] != TEXT:
        raise BenchError(f"not the tool's text: {result}")
    return 1


async def task_call(conn: Connection) -> int:
    """A task created and polled to its result; the requests it took."""
    requests = 1
    params = {"name": "quick", "arguments": {}, "_meta": meta(tasks=True)}
    task = await conn.rpc("tools/call", params, "quick")
    if task.get("resultType") != "task":
        raise BenchError(f"not a task: {task}")
    task_id = task["taskId"]
    while task["status"] in ("working", "input_required"):
        await trio.sleep(POLL_S)
        get = {"taskId": task_id, "_meta": meta(tasks=True)}
        task = await conn.rpc("tasks/get", get, task_id)
        requests += 1
    if task["status"] != "completed" or task["result"]["content"][0]["text"] != "done":
        raise BenchError(f"task {task_id} ended {task}")
    return requests


async def create_call(conn: Connection) -> int:
    """A task created, and not read back (the server runs it to its end); the requests it
    took (one). Beside ``plain``, what a task's creation costs over HTTP."""
    params = {"name": "quick", "arguments": {}, "_meta": meta(tasks=True)}
    task = await conn.rpc("tools/call", params, "quick")
    if task.get("resultType") != "task" or task.get("status") not in ("working", "completed"):
        raise BenchError(f"not a task: {task}")
    return 1


async def open_session(conn: Connection) -> None:
    conn.version = OLD
    params = {"protocolVersion": OLD, "capabilities": {}, "clientInfo": CLIENT_INFO}
    conn.next_id += 1
    message = {"jsonrpc": "2.0", "id": conn.next_id, "method": "initialize", "params": params}
    status, fields, payload = await conn.exchange(message, "initialize")
    answer = find_answer(fields.get("content-type", ""), payload, conn.next_id)
    session = fields.get("mcp-session-id")
    if status != 200 or answer is None or "result" not in answer or not session:
        raise BenchError(f"initialize: HTTP {status} {fields} {payload[:300]!r}")
    conn.headers["mcp-session-id"] = session
    await conn.notify("notifications/initialized")


async def session_call(conn: Connection) -> int:
    """One call on the connection's session; the requests it took (one)."""
    result = await conn.rpc("tools/call", {"name": "test_simple_text", "arguments": {}})
    if result.get("isError") or result["content"][0]["text"] != TEXT:
        raise BenchError(f"not the tool's text: {result}")
    return 1


@dataclass(frozen=True)
class Path_:
    title: str
    op: Callable[[Connection], Awaitable[int]]
    setup: Callable[[Connection], Awaitable[None]] | None = None


PATHS = {
    "plain": Path_("plain tools/call (2026-07-28)", plain_call),
    "task": Path_("task: create, poll to completed, result (2026-07-28)", task_call),
    "create": Path_("a task's creation alone (2026-07-28)", create_call),
    "session": Path_("session tools/call (initialize, 2025-11-25)", session_call, open_session),
}


# ---------------------------------------------------------------------- servers and cases


@dataclass(frozen=True)
class App:
    label: str
    target: str  # module:attribute
    worker: str = "trio"


APPS = {
    "raw": App("raw ASGI app", "bench.raw_app:app"),
    "presa": App("presa_trio", "bench.peer_presa_app:app"),
    "sdk": App("official SDK", "bench.peer_sdk_app:app"),
    "sdk-session": App("official SDK", "bench.peer_sdk_app:session_app"),
    "fastmcp": App("FastMCP", "bench.peer_fastmcp_app:app"),
    "fastmcp-tasks": App("FastMCP", "bench.peer_fastmcp_app:tasks_app", "asyncio"),
}

# (path, app) pairs, presa first in each path: what each path is measured on.
CASES = [
    ("plain", "raw"),
    ("plain", "presa"),
    ("plain", "sdk"),
    ("plain", "fastmcp"),
    ("plain", "fastmcp-tasks"),  # the asyncio worker's own cost, beside FastMCP's tasks
    ("task", "presa"),
    ("task", "fastmcp-tasks"),
    ("create", "presa"),
    ("session", "presa"),
    ("session", "sdk-session"),
    ("session", "fastmcp"),
]
NOT_SERVED = {
    ("task", "sdk"): "the SDK ships no Tasks extension (only the extension hook that"
    " fastmcp-tasks builds on)",
    ("task", "fastmcp-tasks"): "under hypercorn's asyncio worker: Docket, which runs"
    " FastMCP's tasks, needs asyncio (its store asks for asyncio's running loop and its"
    " worker starts with asyncio.create_task), so FastMCP with tasks does not start under"
    " the trio worker",
}
PARKED = ["presa", "fastmcp-tasks"]


def start(app: App, port: int, cpu: str, log: Path) -> http_bench.Server:
    server = http_bench.Server(app.label, app.target, {})
    server.port, server.log = port, log
    env = {**os.environ, "PYTHONPATH": str(http_bench.ROOT)}
    command = [
        *http_bench.pin(cpu), sys.executable, "-m", "hypercorn", "--worker-class", app.worker,
        "--bind", f"127.0.0.1:{port}", app.target,
    ]  # fmt: skip
    with log.open("wb") as out:
        server.proc = subprocess.Popen(
            command, cwd=http_bench.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    return server


async def until_answering(server: http_bench.Server) -> None:
    """Until the server answers a plain call (the raw app answers anything)."""
    with trio.move_on_after(READY_TIMEOUT):
        while server.proc is not None and server.proc.poll() is None:
            conn = Connection(server.port)
            try:
                await plain_call(conn)
                return
            except (OSError, BenchError):
                await trio.sleep(0.2)
            finally:
                await conn.aclose()
    log = server.log.read_text(errors="replace")[-2000:] if server.log else ""
    raise RuntimeError(f"{server.label} did not answer on port {server.port}:\n{log}")


# ---------------------------------------------------------------------- one run


@dataclass
class Run:
    path: str
    app: str
    rep: int
    ops: int = 0
    requests: int = 0  # HTTP requests the counted operations took
    rate: float = 0.0
    cpu_us: float = float("nan")
    client_us: float = float("nan")  # this process's CPU per operation
    errors: list[str] = field(default_factory=list)


async def client(port: int, path: Path_, run: Run, warm_until: float, until: float) -> None:
    conn = Connection(port)
    try:
        if path.setup is not None:
            await path.setup(conn)
        while (now := time.perf_counter()) < until:
            requests = await path.op(conn)
            if now >= warm_until:
                run.ops += 1
                run.requests += requests
    except (BenchError, OSError, trio.TooSlowError, KeyError, ValueError) as exc:
        run.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        await conn.aclose()


async def drive(
    server: http_bench.Server, path: Path_, run: Run, clients: int, warm: float, seconds: float
) -> None:
    """``clients`` clients for ``warm + seconds``; only the last ``seconds`` count, and the
    server's CPU is read across them."""
    assert server.proc is not None
    start_at = time.perf_counter()
    warm_until = start_at + warm
    until = warm_until + seconds
    cpu: list[float] = []
    mine: list[float] = []

    async def read_cpu() -> None:
        await trio.sleep_until(trio.current_time() + warm)
        cpu.append(http_bench.cpu_seconds(server.proc.pid))  # type: ignore[union-attr]
        mine.append(time.process_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_cpu)
        for _ in range(clients):
            nursery.start_soon(client, server.port, path, run, warm_until, until)
    cpu.append(http_bench.cpu_seconds(server.proc.pid))
    mine.append(time.process_time())
    run.rate = run.ops / (time.perf_counter() - warm_until)
    if run.ops and len(cpu) == 2:
        run.cpu_us = (cpu[1] - cpu[0]) * 1e6 / run.ops
        run.client_us = (mine[1] - mine[0]) * 1e6 / run.ops


# ---------------------------------------------------------------------- parked tasks


def rss_kb(pid: int) -> int:
    """The resident memory of the largest process of ``pid``'s tree (hypercorn's worker)."""
    sizes = []
    for p in http_bench.tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        sizes.append(int(status.split("VmRSS:")[1].split()[0]))
    return max(sizes)


async def park(port: int, count: int, connections: int = 8) -> None:
    """``count`` tasks of ``park`` created, then polled until each waits for its answer."""
    ids: list[str] = []

    async def creator(share: int) -> None:
        conn = Connection(port)
        try:
            for _ in range(share):
                params = {"name": "park", "arguments": {}, "_meta": meta(tasks=True)}
                task = await conn.rpc("tools/call", params, "park")
                if task.get("resultType") != "task":
                    raise BenchError(f"not a task: {task}")
                ids.append(task["taskId"])
        finally:
            await conn.aclose()

    async with trio.open_nursery() as nursery:
        for i in range(connections):
            nursery.start_soon(creator, count // connections + (i < count % connections))
    conn = Connection(port)
    try:
        with trio.fail_after(SETTLE_TIMEOUT):
            for task_id in ids:
                while True:
                    get = {"taskId": task_id, "_meta": meta(tasks=True)}
                    status = (await conn.rpc("tasks/get", get, task_id))["status"]
                    if status == "input_required":
                        break
                    if status != "working":
                        raise BenchError(f"parked task {task_id} is {status}")
                    await trio.sleep(POLL_S)
    finally:
        await conn.aclose()


def parked_bytes(app: App, count: int, cpu: str, logdir: Path) -> float:
    """Bytes of resident memory per parked task, on a fresh server: a first batch parked
    (the paths warmed, the first allocations made), then ``count`` more."""
    server = start(app, http_bench.free_port(), cpu, logdir / f"parked-{app.target}.log")
    try:
        trio.run(until_answering, server)
        trio.run(park, server.port, max(20, count // 10))
        assert server.proc is not None
        before = rss_kb(server.proc.pid)
        trio.run(park, server.port, count)
        after = rss_kb(server.proc.pid)
    finally:
        http_bench.stop(server)
    return (after - before) * 1024 / count


# ---------------------------------------------------------------------- report


def spread(values: list[float], digits: int = 0) -> str:
    return (
        f"{statistics.median(values):,.{digits}f} "
        f"({min(values):,.{digits}f}-{max(values):,.{digits}f})"
    )


def report(runs: list[Run], parked: dict[str, list[float]], clients: int) -> None:
    print(
        f"\nMedian of the runs (lowest-highest) at {clients} concurrent clients;"
        " ratios to presa taken within a repetition"
    )
    print(f"{'path':<10}{'server':<34}{'ops/s':>26}{'x presa':>24}{'server CPU us/op':>26}"
          f"{'CPU x presa':>24}{'client CPU us/op':>18}{'requests/op':>13}")  # fmt: skip
    for path in PATHS:
        presa = {r.rep: r for r in runs if r.path == path and r.app == "presa"}
        for case_path, name in CASES:
            if case_path != path:
                continue
            mine = [r for r in runs if r.path == path and r.app == name and r.ops]
            if not mine:
                continue
            app = APPS[name]
            label = app.label + ("" if app.worker == "trio" else f" ({app.worker} worker)")
            ratios = [r.rate / presa[r.rep].rate for r in mine if presa.get(r.rep)]
            ratio = spread(ratios, 3) if ratios else ""
            cpu = spread([r.cpu_us for r in mine])
            cpus = [r.cpu_us / presa[r.rep].cpu_us for r in mine if presa.get(r.rep)]
            cpu_ratio = spread(cpus, 3) if cpus else ""
            client_cpu = statistics.median(r.client_us for r in mine)
            requests = statistics.median(r.requests / r.ops for r in mine)
            print(f"{path:<10}{label:<34}{spread([r.rate for r in mine], 1):>26}"
                  f"{ratio:>24}{cpu:>26}{cpu_ratio:>24}{client_cpu:>18,.0f}"
                  f"{requests:>13.2f}")  # fmt: skip
    for (path, name), why in NOT_SERVED.items():
        print(f"  {path} / {APPS[name].label}: {why}")
    plain = {r.rep: r for r in runs if r.path == "plain" and r.app == "presa" and r.ops}
    created = [r for r in runs if r.path == "create" and r.app == "presa" and r.ops]
    pairs = [(r, plain[r.rep]) for r in created if r.rep in plain]
    if pairs:
        rates = spread([r.rate / p.rate for r, p in pairs], 3)
        cpus = spread([r.cpu_us / p.cpu_us for r, p in pairs], 3)
        print(f"\npresa_trio, a task's creation over a plain call (within a repetition):"
              f" throughput {rates}, server CPU per operation {cpus}")  # fmt: skip
    if parked:
        print("\nResident memory per parked task (a task waiting on its client's answer)")
        for name, values in parked.items():
            app = APPS[name]
            label = app.label + ("" if app.worker == "trio" else f" ({app.worker} worker)")
            print(f"  {label:<34}{spread(values):>26} B")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0, help="measured seconds a run")
    parser.add_argument("--warm", type=float, default=1.0, help="seconds of warm-up a run")
    parser.add_argument("--parked", type=int, default=2000, help="tasks parked (0: none)")
    parser.add_argument("--paths", default=",".join(PATHS), help="of: " + ", ".join(PATHS))
    parser.add_argument("--server-cpu", default="1", help="taskset -c for servers ('' = none)")
    parser.add_argument("--client-cpu", default="0", help="taskset -c for this client")
    parser.add_argument("--quick", action="store_true", help="one short rep, at most 100 parked")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.seconds, args.warm = 1, 0.5, 0.3
        args.parked = min(args.parked, 100)
    paths = [p for p in args.paths.split(",") if p]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        parser.error(f"unknown path(s): {', '.join(unknown)}")
    if args.client_cpu:
        os.sched_setaffinity(0, {int(c) for c in args.client_cpu.split(",")})
    cases = [(p, name) for p, name in CASES if p in paths]
    names = list(dict.fromkeys(name for _, name in cases))
    load = os.getloadavg()
    print(
        f"peers {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {os.cpu_count()} CPUs,"
        f" load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; servers on cpu"
        f" {args.server_cpu or 'any'}, client on cpu {args.client_cpu or 'any'};"
        f" {args.clients} clients, {args.seconds:g} s a run after {args.warm:g} s of warm-up,"
        f" {args.reps} reps; tasks polled every {POLL_S * 1000:g} ms"
    )
    # SIGTERM/SIGHUP unwind like Ctrl-C, so the finally below stops the servers
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    runs: list[Run] = []
    parked: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="peers-") as scratch:
        logdir = Path(scratch)
        servers: dict[str, http_bench.Server] = {}
        try:
            for name in names:
                port = http_bench.free_port(taken={s.port for s in servers.values()})
                servers[name] = start(APPS[name], port, args.server_cpu, logdir / f"{name}.log")
            for name in names:
                trio.run(until_answering, servers[name])
            for rep in range(1, args.reps + 1):
                for path, name in cases if rep % 2 else cases[::-1]:
                    run = Run(path, name, rep)
                    trio.run(drive, servers[name], PATHS[path], run, args.clients, args.warm,
                             args.seconds)  # fmt: skip
                    runs.append(run)
                    print(
                        f"  rep {rep} {path:<8}{name:<15}{run.rate:>10.1f} ops/s"
                        f"{run.cpu_us:>10.0f} us CPU/op (client {run.client_us:.0f})"
                        f"{run.requests / max(run.ops, 1):>6.2f} requests/op"
                        + (f"  ERRORS {len(run.errors)}: {run.errors[:2]}" if run.errors else ""),
                        flush=True,
                    )
                if args.parked and "task" in paths:
                    for name in PARKED:
                        size = parked_bytes(APPS[name], args.parked, args.server_cpu, logdir)
                        parked.setdefault(name, []).append(size)
                        print(f"  rep {rep} parked  {name:<15}{size:>10,.0f} B/task", flush=True)
        finally:
            for server in servers.values():
                http_bench.stop(server)
        failed = [r for r in runs if r.errors]
        for r in failed:
            log = logdir / f"{r.app}.log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            print(f"! {r.path} {r.app} rep {r.rep}: {r.errors[:3]}\n{tail}")
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    report(runs, parked, args.clients)
    errors = sum(len(r.errors) for r in runs)
    print(f"\nerrors: {errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
