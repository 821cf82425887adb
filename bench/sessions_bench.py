"""What the older era's sessions cost: a pushed request answered on another worker, a session's
``tools/call`` beside a 2026-07-28 one, and the database reads of a session's request.

Four measurements (``--parts``, all four by default):

1. ``cross``: a pushed request's answer crossing workers. Two real server processes
   (``hypercorn --worker-class trio``, ``tests/support/sessions_app.py``) share one store,
   SQLite (a file) or PostgreSQL (a throwaway cluster the bench starts, Unix socket). The
   client opens a session and calls ``greet`` on worker A, reading its stream; when the
   pushed ``elicitation/create`` arrives it POSTs the answer to worker B (every message on a
   fresh connection). The latency is the answer's POST sent to the tool's final result read
   on A's stream; beside it, in the same run, the answer POSTed to A itself, and how long B
   took to take the answer (its 202). ``--samples`` of each per run, after a warm-up, fresh
   servers and a fresh store each run;
2. ``inproc``: a session's ``tools/call`` beside a 2026-07-28 one in process, on the memory
   backend: the ASGI app called directly (``receive`` and ``send`` checkpointing as
   hypercorn's do), a no-argument tool answering text, the session's request with its
   ``Mcp-Session-Id`` against the same request with ``_meta``; the two apps in turn, the best
   of ``--turns`` turns of ``-n`` requests per run; the ratio session / 2026-07-28;
3. ``instructions`` (needs valgrind): machine instructions per request of each, counted by
   callgrind (this script under valgrind twice, ``--count`` requests apart; the median of
   ``--runs`` counts); with ``--base-tree DIR`` (a checkout of an older commit, made with
   ``git worktree add``) also the 2026-07-28 request with DIR's ``presa_trio`` (this script
   run with ``PYTHONPATH=DIR``: it uses only what every tree has);
4. ``reads``: the SQL statements a session's ``tools/call`` runs against the database, on a
   SQLite-backed server in process, the session open and its schema loaded: every statement
   of every connection seen through ``sqlite3``'s trace callback, sorted by the table it
   names, beside the same count for the 2026-07-28 request and for the server left idle as
   long.

The first lines say which ``presa_trio`` ran (its directory and commit).

    .venv/bin/python bench/sessions_bench.py                      # all four; about 8 min
    .venv/bin/python bench/sessions_bench.py --parts cross --stores sqlite --samples 200
    .venv/bin/python bench/sessions_bench.py --parts instructions --base-tree /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import callgrind  # beside this file (the script's directory is first on sys.path)
import trio

ROOT = Path(__file__).resolve().parent.parent
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TARGETS = {"sqlite": 150.0, "postgresql": 50.0}  # the cross-worker p99, ms (issue)
RATIO_TARGET = 1.25  # a session's tools/call over a 2026-07-28 one, in process


def spread(values: list[float], digits: int = 1) -> str:
    """``median (min-max)`` of ``values``."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:,.{digits}f} ({low:,.{digits}f}-{high:,.{digits}f})"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ------------------------------------------------------------------ in process: the app


def hello_app(backend: str | None = None, *, resumable: bool = True) -> Any:
    """A server of one tool answering text, with default settings (older era on; at a tree
    from before it, 2026-07-28 alone); its ASGI app. Only public API: it runs against any
    tree's ``presa_trio`` (``--base-tree``). ``resumable=False``: 2025-11-25 calls answer
    on streams that cannot be resumed (only trees that have resumable streams)."""
    from presa_trio import Server

    if resumable:
        server = Server("bench", "1", loop_warning=None)
    else:
        from presa_trio import Sessions

        server = Server("bench", "1", loop_warning=None, sessions=Sessions(resumable=False))

    @server.tool(thread=False)  # on the event loop, as the benches' other tools
    def hello() -> str:
        """Says hello."""
        return "hello"

    return server.asgi_app(backend=backend)


JSON_HEADERS = [
    (b"host", b"127.0.0.1:3200"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
]


def message(method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id >= 0:
        body["id"] = request_id
    if params is not None:
        body["params"] = params
    return json.dumps(body, separators=(",", ":")).encode()


MODERN_CALL = message(
    "tools/call",
    {
        "name": "hello",
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        },
    },
)
MODERN_HEADERS = [
    *JSON_HEADERS,
    (b"mcp-protocol-version", MODERN.encode()),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"hello"),
]
LEGACY_CALL = message("tools/call", {"name": "hello", "arguments": {}})


def scope_for(headers: list[tuple[bytes, bytes]], body: bytes) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
            "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 3200),
            "headers": [*headers, (b"content-length", str(len(body)).encode())]}  # fmt: skip


class Exchange:
    """One request as hypercorn presents it: the body, then ``http.disconnect`` once
    answered; ``receive`` and ``send`` are checkpoints, as hypercorn's are. (asgi_profile.py
    has its twin; this script imports nothing of the repository's beside callgrind, so that
    ``--base-tree`` measures that tree's presa_trio.)"""

    def __init__(self, body: bytes) -> None:
        self.body: bytes | None = body
        self.sent: list[dict[str, Any]] = []
        self.answered = trio.Event()

    async def receive(self) -> dict[str, Any]:
        if self.body is not None:
            body, self.body = self.body, None
            await trio.lowlevel.checkpoint()
            return {"type": "http.request", "body": body, "more_body": False}
        await self.answered.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            self.answered.set()

    def status(self) -> int:
        return int(self.sent[0]["status"])

    def header(self, name: bytes) -> str | None:
        for key, value in self.sent[0].get("headers", []):
            if key.lower() == name:
                return bytes(value).decode()
        return None

    def body_bytes(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


async def post(app: Any, headers: list[tuple[bytes, bytes]], body: bytes) -> Exchange:
    exchange = Exchange(body)
    await app(scope_for(headers, body), exchange.receive, exchange.send)
    return exchange


class Caller:
    """Sends one kind of ``tools/call`` (``modern`` or ``legacy``) to a running app; a
    ``legacy`` one opens its session first."""

    def __init__(self, app: Any, kind: str) -> None:
        self.app = app
        self.kind = kind  # modern, legacy, or plain (legacy, not resumable)
        self.headers = MODERN_HEADERS
        self.body = MODERN_CALL

    async def open(self) -> None:
        if self.kind == "modern":
            await trio.lowlevel.checkpoint()
            return
        params = {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        opened = await post(self.app, JSON_HEADERS, message("initialize", params, 0))
        session = opened.header(b"mcp-session-id")
        if opened.status() != 200 or session is None:
            raise RuntimeError(f"initialize failed: {opened.sent}")
        self.headers = [
            *JSON_HEADERS,
            (b"mcp-session-id", session.encode()),
            (b"mcp-protocol-version", LEGACY.encode()),
        ]
        self.body = LEGACY_CALL
        taken = await post(self.app, self.headers, message("notifications/initialized", None, -1))
        if taken.status() != 202:
            raise RuntimeError(f"notifications/initialized not taken: {taken.sent}")

    async def call(self) -> None:
        done = await post(self.app, self.headers, self.body)
        body = done.body_bytes()
        if done.status() != 200 or b'"result"' not in body or b'"isError":true' in body:
            raise RuntimeError(f"bad {self.kind} answer: {done.sent}")


@contextmanager
def lifespan_messages() -> Iterator[tuple[Any, Any, trio.Event]]:
    to_app, from_test = trio.open_memory_channel[dict[str, Any]](1)
    started = trio.Event()

    async def life_send(message: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        if message["type"] in ("lifespan.startup.complete", "lifespan.startup.failed"):
            started.set()

    with to_app, from_test:
        yield to_app, (from_test.receive, life_send), started


async def serving(apps: list[Any], body: Callable[[], Any]) -> Any:
    """Run the lifespan of every app in ``apps`` around ``body()`` (a coroutine function);
    its result. The ASGI lifespan protocol itself, which every tree's app speaks."""
    with ExitStack() as stack:
        async with trio.open_nursery() as nursery:
            channels = []
            for app in apps:
                to_app, (receive, send), started = stack.enter_context(lifespan_messages())
                nursery.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}},
                                   receive, send)  # fmt: skip
                await to_app.send({"type": "lifespan.startup"})
                await started.wait()
                channels.append(to_app)
            result = await body()
            for to_app in channels:
                await to_app.send({"type": "lifespan.shutdown"})
    return result


# ------------------------------------------------------------------ 2: in process, time


async def timed_turns(n: int, turns: int) -> dict[str, float]:
    """The best of ``turns`` turns of ``n`` requests of each kind, the kinds in turn; us per
    request."""
    apps = {
        "modern": hello_app(),
        "legacy": hello_app(),
        "plain": hello_app(resumable=False),
    }
    callers = {kind: Caller(app, kind) for kind, app in apps.items()}
    best = dict.fromkeys(apps, float("inf"))

    async def body() -> None:
        for caller in callers.values():
            await caller.open()
            for _ in range(200):  # warm-up: schemas compiled, caches filled
                await caller.call()
        for _ in range(turns):
            for kind, caller in callers.items():
                started = time.perf_counter()
                for _ in range(n):
                    await caller.call()
                best[kind] = min(best[kind], time.perf_counter() - started)

    await serving(list(apps.values()), body)
    return {kind: seconds / n * 1e6 for kind, seconds in best.items()}


def inproc(args: argparse.Namespace) -> None:
    modern, legacy, plain, ratios, plain_ratios = [], [], [], [], []
    for _ in range(args.runs):
        us = trio.run(timed_turns, args.n, args.turns)
        modern.append(us["modern"])
        legacy.append(us["legacy"])
        plain.append(us["plain"])
        ratios.append(us["legacy"] / us["modern"])
        plain_ratios.append(us["plain"] / us["modern"])
    print(
        f"\n2. tools/call in process, memory backend ({args.n:,} requests a turn, the best of"
        f" {args.turns} turns a run, median (min-max) of {args.runs} runs)"
    )
    print(f"  2026-07-28 (_meta):         {spread(modern)} us/request")
    print(f"  {LEGACY} session:         {spread(legacy)} us/request (a resumable stream)")
    print(f"  ... not resumable:          {spread(plain)} us/request")
    verdict = "met" if statistics.median(plain_ratios) <= RATIO_TARGET else "NOT met"
    print(f"  session / 2026-07-28:       {spread(ratios, 3)}x (resumable)")
    print(
        f"  ... not resumable:          {spread(plain_ratios, 3)}x"
        f" (target at most {RATIO_TARGET:.2f}x: {verdict})"
    )


# ------------------------------------------------------------------ 3: instructions


def count_one(kinds: list[str], n: int) -> None:
    """What runs under valgrind: a warm-up, then ``n`` requests of each kind."""

    async def run(kind: str) -> None:
        caller = Caller(hello_app(), kind)

        async def body() -> None:
            await caller.open()
            for _ in range(50):
                await caller.call()
            for _ in range(n):
                await caller.call()

        await serving([caller.app], body)

    for kind in kinds:
        trio.run(run, kind)


def instructions_of(kind: str, n: int, tree: Path | None = None) -> float:
    """Machine instructions per request of ``kind``: this script under callgrind twice, one
    run ``n`` requests longer than the other (each run also starts Python, builds the server
    and warms up; the difference is the requests alone). ``tree``: with its ``presa_trio``."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    counts = []
    for requests in (100, 100 + n):
        command = [*callgrind.PREFIX, sys.executable, __file__, "--count-one", kind,
                   "-n", str(requests)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"--count-one {kind} failed:\n{done.stderr[-3000:]}")
        counts.append(callgrind.collected(done.stderr))
    return (counts[1] - counts[0]) / n


def package_of(tree: Path | None) -> str:
    """Where ``presa_trio`` is imported from (``tree`` first on PYTHONPATH, if given), its
    commit, and whether its files differ from that commit."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    found = subprocess.run(
        [sys.executable, "-c", "import presa_trio; print(presa_trio.__file__)"],
        capture_output=True, text=True, env=env, check=True, cwd="/",
    ).stdout.strip()  # fmt: skip
    package = Path(found).parent

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(package), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "?"
    edited = " (edited since)" if git("status", "--porcelain", "--", ".") else ""
    return f"{package.parent} at {commit}{edited}"


def instructions(args: argparse.Namespace) -> None:
    if not callgrind.available():
        print(f"\n3. sessions_bench: {callgrind.MISSING}")
        return
    print(
        f"\n3. machine instructions per in-process tools/call (callgrind, {args.count:,} requests"
        f" counted, median (min-max) of {args.runs} counts)"
    )
    trees: dict[str, Path | None] = {"this tree": None}
    if args.base_tree is not None:
        trees["the base tree"] = args.base_tree
    counts: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.runs):  # in turn: nothing drifts, but each process lays out its own
        for name, tree in trees.items():
            for kind in ("modern", "legacy") if tree is None else ("modern",):
                counts.setdefault((name, kind), []).append(instructions_of(kind, args.count, tree))
    modern = counts["this tree", "modern"]
    legacy = counts["this tree", "legacy"]
    print(f"  this tree: {package_of(None)}")
    print(f"  2026-07-28 (_meta):         {spread(modern, 0)}")
    print(f"  {LEGACY} session:         {spread(legacy, 0)}")
    ratio = statistics.median(legacy) / statistics.median(modern)
    print(f"  session / 2026-07-28:       {ratio:.3f}x")
    if args.base_tree is not None:
        base = counts["the base tree", "modern"]
        print(f"  the base tree: {package_of(args.base_tree)}")
        print(f"  2026-07-28 (_meta) there:   {spread(base, 0)}")
        before = statistics.median(base)
        change = statistics.median(modern) - before
        print(f"  this tree less the base:    {change:+,.0f} ({change / before:+.1%})")


# ------------------------------------------------------------------ 4: database reads


class Statements:
    """Every SQL statement of every ``sqlite3`` connection opened from now on (its trace
    callback, called in whichever thread runs the statement)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._connect = sqlite3.connect

    def __enter__(self) -> Statements:
        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = self._connect(*args, **kwargs)
            conn.set_trace_callback(self.seen.append)
            return conn

        sqlite3.connect = connect  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        sqlite3.connect = self._connect

    def since(self, mark: int) -> Counter[str]:
        return Counter(kind_of(sql) for sql in self.seen[mark:])


def kind_of(sql: str) -> str:
    text = " ".join(sql.split()).upper()
    if text.startswith(("BEGIN", "COMMIT", "ROLLBACK")):
        return "transaction (BEGIN/COMMIT)"
    verb = text.split(" ", 1)[0]
    if "PRESA_SESSIONS" in text:
        return f"sessions: {verb}"
    if "DATA_VERSION" in text:
        return "signal watcher: PRAGMA data_version"
    if "PRESA_MESSAGES" in text:
        return f"signals: {verb} presa_messages"
    if "PRESA_WORKERS" in text:
        return "heartbeat"
    return f"other: {text[:60]}"


async def counted(url: str, n: int, settle: float) -> dict[str, tuple[Counter[str], float]]:
    """The statements of ``n`` requests of each kind, and of the server idle as long as the
    session's took (each window ends ``settle`` s after its last request: what a request
    set off in the background is counted too); and each window's length."""
    out: dict[str, tuple[Counter[str], float]] = {}
    with Statements() as statements:
        app = hello_app(backend=url)
        callers = {kind: Caller(app, kind) for kind in ("legacy", "modern")}

        async def body() -> None:
            for caller in callers.values():
                await caller.open()
                for _ in range(5):  # warm: schemas loaded, tables made
                    await caller.call()
            await trio.sleep(settle)
            for kind, caller in callers.items():
                mark, started = len(statements.seen), time.perf_counter()
                for _ in range(n):
                    await caller.call()
                await trio.sleep(settle)
                out[kind] = (statements.since(mark), time.perf_counter() - started)
            took = out["legacy"][1]
            mark = len(statements.seen)
            await trio.sleep(took)
            out["idle"] = (statements.since(mark), took)

        await serving([app], body)
    return out


def reads(args: argparse.Namespace, scratch: Path) -> None:
    runs = [
        trio.run(counted, f"sqlite:///{scratch}/reads-{run}.db", args.reads, 0.05)
        for run in range(args.runs)
    ]
    print(
        f"\n4. SQL statements per tools/call, SQLite in process, the session open ({args.reads}"
        f" requests a window, median (min-max) of {args.runs} runs; idle: the server left alone"
        " as long as the session's window)"
    )
    for kind, label in (("legacy", f"{LEGACY} session"), ("modern", "2026-07-28"), ("idle", "")):
        kinds = sorted({k for run in runs for k in run[kind][0]})
        totals = [sum(run[kind][0].values()) / args.reads for run in runs]
        window = statistics.median(run[kind][1] for run in runs) * 1000
        name = label or "idle, in all"
        print(f"  {name:<24} {spread(totals, 2)} per request ({window:,.0f} ms a window)")
        for found in kinds:
            per = [run[kind][0][found] / args.reads for run in runs]
            print(f"    {found:<44} {spread(per, 2)}")
    own = [
        sum(c for k, c in run["legacy"][0].items() if k.startswith("sessions")) / args.reads
        for run in runs
    ]
    watcher = [
        sum(c for k, c in run["legacy"][0].items() if k.startswith("signal")) / args.reads
        for run in runs
    ]
    verdict = "met" if statistics.median(own) <= 1 else "NOT met"
    print(
        f"  a session's request: {spread(own, 2)} statements on the session table (target at"
        f" most one read: {verdict}); beside them {spread(watcher, 2)} reads by the signal"
        " watcher, which the request's attention() wakes"
    )


# ------------------------------------------------------------------ 1: across workers

ANSWER = {"action": "accept", "content": {"name": "Ada"}}
GREET = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "greet", "arguments": {}},
}


async def crossing(a: int, b: int, samples: int, warm: int) -> dict[str, list[float]]:
    """Milliseconds from the answer's POST sent to the final result read on A, answered to
    B and to A in turn; and until B's 202."""
    from support.session_http import open_session, post, streaming

    out: dict[str, list[float]] = {"to B": [], "to A": [], "B took it": []}
    session = await open_session(a)
    for sample in range(warm + samples):
        for target in (b, a):
            async with streaming(a, session, {**GREET, "id": sample}) as stream:
                pushed = await stream.next_message()
                if pushed.get("method") != "elicitation/create":
                    raise RuntimeError(f"expected elicitation/create, got {pushed}")
                answer = {"jsonrpc": "2.0", "id": pushed["id"], "result": ANSWER}
                sent = time.perf_counter()
                taken = await post(target, session, answer)
                took = time.perf_counter()
                final = await stream.next_message()
                done = time.perf_counter()
            if taken.status != 202 or "Hello, Ada!" not in final["result"]["content"][0]["text"]:
                raise RuntimeError(f"bad exchange: {taken} then {final}")
            if sample < warm:
                continue
            if target == b:
                out["to B"].append((done - sent) * 1000)
                out["B took it"].append((took - sent) * 1000)
            else:
                out["to A"].append((done - sent) * 1000)
    return out


def cross(args: argparse.Namespace, scratch: Path, stack: ExitStack) -> None:
    from support.servers import SUPPORT, running

    stores: dict[str, Callable[[int], str]] = {}
    if "sqlite" in args.stores:
        query = f"?{args.sqlite_options}" if args.sqlite_options else ""
        stores["sqlite"] = lambda run: f"sqlite:///{scratch}/cross-{run}.db{query}"
    if "postgresql" in args.stores:
        from support.postgres_cluster import running_cluster

        cluster = stack.enter_context(running_cluster())
        stores["postgresql"] = lambda run: cluster.new_database()
    print(
        f"\n1. a pushed elicitation/create answered on another worker: the answer's POST sent"
        f" to the final result read on A, ms ({args.samples} samples a run after {args.warm},"
        f" median (min-max) of {args.runs} runs, fresh servers and store each run)"
    )
    for name, url in stores.items():
        figures: dict[str, dict[str, list[float]]] = {}
        for run in range(args.runs):
            env = {"PRESA_STORE": url(run)}
            with (
                running("sessions_app:app", SUPPORT, env=env) as a,
                running("sessions_app:app", SUPPORT, env=env) as b,
            ):
                seen = trio.run(crossing, a.port, b.port, args.samples, args.warm)
            for label, values in seen.items():
                for q in ("p50", "p99"):
                    value = percentile(values, 0.5 if q == "p50" else 0.99)
                    figures.setdefault(label, {}).setdefault(q, []).append(value)
        for label, by_q in figures.items():
            what = {
                "to B": "answered to B (across)",
                "to A": "answered to A (same worker)",
                "B took it": "B's 202 for the answer",
            }[label]
            print(
                f"  {name:>10}, {what:<28} p50 {spread(by_q['p50'], 2)}, "
                f"p99 {spread(by_q['p99'], 2)}"
            )
        p99 = statistics.median(figures["to B"]["p99"])
        target = TARGETS[name]
        verdict = "met" if p99 < target else f"NOT met, by {p99 - target:,.1f} ms"
        print(f"  {name:>10}, across: p99 {p99:.2f} ms, target under {target:g} ms: {verdict}")


# ------------------------------------------------------------------ main

PARTS = ("cross", "inproc", "instructions", "reads")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS), help=f"of {', '.join(PARTS)}")
    ap.add_argument("--runs", type=int, default=3, help="runs of each measurement")
    ap.add_argument("--samples", type=int, default=200, help="cross: answers a run, each way")
    ap.add_argument("--warm", type=int, default=10, help="cross: samples not counted, first")
    ap.add_argument("--stores", default="sqlite,postgresql", help="cross: the stores")
    ap.add_argument(
        "--sqlite-options", default="", help="cross: the SQLite URL's query (poll=0.002, say)"
    )
    ap.add_argument("-n", type=int, default=2000, help="inproc: requests a turn")
    ap.add_argument("--turns", type=int, default=5, help="inproc: turns a run, the best kept")
    ap.add_argument("--count", type=int, default=1000, help="instructions: requests counted")
    ap.add_argument("--reads", type=int, default=200, help="reads: requests a window")
    ap.add_argument(
        "--base-tree",
        type=Path,
        default=None,
        help="instructions: also count the 2026-07-28 request with this tree's presa_trio",
    )
    ap.add_argument("--count-one", metavar="KINDS", help=argparse.SUPPRESS)  # under valgrind
    args = ap.parse_args()
    if args.count_one:
        count_one(args.count_one.split(","), args.n)
        return 0
    parts = [p for p in args.parts.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        ap.error(f"unknown parts: {', '.join(sorted(unknown))}")
    sys.path.insert(0, str(ROOT / "tests"))  # support/: the servers, the cluster, the client
    print(f"presa_trio sessions bench, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"presa_trio: {package_of(None)}")
    with tempfile.TemporaryDirectory() as scratch_dir, ExitStack() as stack:
        scratch = Path(scratch_dir)
        if "cross" in parts:
            cross(args, scratch, stack)
        if "inproc" in parts:
            inproc(args)
        if "instructions" in parts:
            instructions(args)
        if "reads" in parts:
            reads(args, scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
