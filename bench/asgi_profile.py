"""In-process cost of one tools/call through the ASGI apps, called directly (optionally cProfiled).

No sockets, no hypercorn, no concurrency: trio scheduler passes are not amortized as under load.
The breakdown starts from two raw apps: the raw app itself (trio's scheduler passes and the
exchange, which presa pays too) and the raw app run as presa runs a request, in a nursery of its
own with a disconnect watcher and trio deadlines (what that structure adds). ``folded``
(``bench/folded_app.py``) makes presa's checks for this request in one function: presa-out-off
less folded is what presa's structure costs. Then it times each stage of presa's request alone
(coroutines driven by hand, so that no scheduler pass lands in a stage), each one directly, never
as the difference of two timings, which noise could make negative. What is left of the whole is
the ASGI edge (headers, the responder) and the joins between stages, which cost more inside a
whole request than alone.

``--cold`` times the apps and the stages again after evicting the CPU caches before each request
(``Evictor``): under load a request's code and data are no longer in the core's caches when it
runs, and presa's share then costs two to three times what it costs warm."""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import pstats
import statistics
import subprocess
import sys
import time
import timeit
from collections import Counter
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

import outcome
import trio
import trio.testing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import callgrind, folded_app, raw_app
from bench.http_bench import PROTO, ROOT, request_body
from fixtures.conformance import build_server
from presa_trio import Validation
from presa_trio._kernel.requestlog import CURRENT
from presa_trio._protocol.headers import RoutingHeaders
from presa_trio._protocol.jsonrpc import Request, encode, parse_message, result_message

HEADERS = [
    (b"host", b"127.0.0.1:3200"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", PROTO.encode()),
    (b"mcp-method", b"tools/call"),
]
TOOL = "test_simple_text"  # the fixture's tool the benchmark calls


def scope_for(body: bytes, tool: str = TOOL) -> dict[str, Any]:
    """The ASGI scope of a ``tools/call`` of ``tool`` whose body is ``body``."""
    headers = [*HEADERS, (b"mcp-name", tool.encode()), (b"content-length", str(len(body)).encode())]
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
            "root_path": "", "headers": headers, "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 3200)}  # fmt: skip


class Exchange:
    """One request as hypercorn presents it: the body, then http.disconnect once answered.

    Like hypercorn's, ``receive`` and ``send`` are checkpoints (a memory channel, a socket
    write) even when they need not wait."""

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


class Evictor:
    """What ``--cold`` runs before each request: a store to every 64-byte line of an 8 MB
    buffer and a pass over 20,000 small dicts, so that the request starts with the core's L1
    and L2 caches (32 KB and 1 MB a core here) holding other data, as it does in a loaded
    server, where hypercorn's work for the other connections runs between a request's steps.
    About 1.1 ms; the request's time does not include it."""

    def __init__(self, megabytes: int = 8, objects: int = 20_000) -> None:
        self.buffer = bytearray(megabytes * 1024 * 1024)
        self.ones = b"\x01" * (len(self.buffer) // 64)
        self.items = [{"n": i} for i in range(objects)]

    def __call__(self) -> None:
        self.buffer[::64] = self.ones
        for item in self.items:
            item["n"] += 1


async def drive(
    app: Any,
    n: int,
    body: bytes,
    traced: Any = None,
    between: Callable[[], None] | None = None,
    tool: str = TOOL,
) -> float:
    """Run lifespan startup, n sequential requests (timed), then shutdown; return seconds.

    With ``traced`` (a ``sys.settrace`` function), the requests alone run under it. With
    ``between``, it runs before each request, outside the time counted. ``tool`` is the
    tool the body calls (its ``Mcp-Name``)."""
    to_app, from_test = trio.open_memory_channel[dict[str, Any]](1)

    async def life_send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    started = trio.Event()
    scope = scope_for(body, tool)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}},
                           from_test.receive, life_send)  # fmt: skip
        await to_app.send({"type": "lifespan.startup"})
        await started.wait()
        t0 = time.perf_counter()
        sys.settrace(traced)
        for _ in range(n):
            if between is not None:
                paused = time.perf_counter()
                between()
                t0 += time.perf_counter() - paused  # not the request's time
            exchange = Exchange(body)
            await app(scope, exchange.receive, exchange.send)
            sent = exchange.sent
            if sent[0].get("status") != 200 or b'"result"' not in sent[-1]["body"]:
                raise RuntimeError(f"bad response: {sent}")
        await trio.testing.wait_all_tasks_blocked()  # what a request left running counts too
        sys.settrace(None)
        elapsed = time.perf_counter() - t0
        await to_app.send({"type": "lifespan.shutdown"})
    return elapsed


async def nursery_raw(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The raw app run as presa runs each request: in a nursery of its own whose scope's
    deadline bounds the body's arrival and then the final write, beside a task that cancels
    it if the client goes away. What trio's part of presa's design costs, with no presa
    code: the floor of ``presa - raw``."""
    if scope["type"] != "http":
        await raw_app.app(scope, receive, send)
        return
    async with trio.open_nursery() as request:
        request.cancel_scope.deadline = trio.current_time() + 30
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        request.cancel_scope.deadline = math.inf
        request.start_soon(_watch, receive, request.cancel_scope)
        request.cancel_scope.deadline = trio.current_time() + 30
        await send({"type": "http.response.start", "status": 200, "headers": raw_app.HEADERS})
        await send({"type": "http.response.body", "body": raw_app.BODY})
        request.cancel_scope.cancel()


async def _watch(receive: Any, request: trio.CancelScope) -> None:
    """``nursery_raw``'s disconnect watcher (its answer is sent whole: nothing to spare)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def opcodes(app: Any, body: bytes, n: int = 500) -> tuple[float, Counter[str]]:
    """Python opcodes executed per request (``sys.settrace`` with ``f_trace_opcodes``):
    deterministic where times are noisy. C work (JSON, jsonschema-rs) counts as one call.
    Also returns the count per function (``file:function``), summed over the ``n``."""
    per: Counter[str] = Counter()

    def trace(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        code = frame.f_code
        where = f"{Path(code.co_filename).name}:{code.co_name}"

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "opcode":
                per[where] += 1
            return local

        return local

    trio.run(drive, app, 50, body)  # warm-up
    trio.run(drive, app, n, body, trace)
    return sum(per.values()) / n, per


def by_hand(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to its end, answering each trio checkpoint at once (no scheduler pass)."""
    try:
        coro.send(None)
        while True:
            coro.send(outcome.Value(None))
    except StopIteration as done:
        return done.value


def best_us(fn: Callable[[], object], n: int) -> float:
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6


def cold_us(fn: Callable[[], object], n: int, evict: Callable[[], None]) -> float:
    """The median of ``n`` calls of ``fn``, each after ``evict`` (not counted)."""
    samples = []
    for _ in range(n):
        evict()
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


Timer = Callable[[Callable[[], object], int], float]


async def stages(app: Any, body: bytes, n: int, timer: Timer = best_us) -> dict[str, float]:
    """Microseconds per request of each stage of presa's request path, each timed alone
    (none is a difference of two timings, which noise can make negative) by ``timer``."""
    dispatcher = app.dispatcher
    request = parse_message(body)
    assert isinstance(request, Request)
    raw_headers = scope_for(body)["headers"]
    route = dispatcher.routes["tools/call"]
    message = {"jsonrpc": "2.0", "id": 1, "method": request.method, "params": request.params}

    class Quiet:
        async def keepalive(self) -> None: ...

    async with app.lifespan() as runtime:
        headers = RoutingHeaders(raw_headers)
        result = by_hand(dispatcher._run(request, headers, Quiet(), runtime, None))
        meta = dispatcher.admit(request, headers)[1]
        quiet = Quiet()

        def context() -> Any:
            return dispatcher._context(request, meta, headers, quiet, runtime, None)

        def dispatch() -> None:
            # what the dispatcher itself does around the handler: the log context, the
            # request's Context, the result's stamps (on a copy, as each result is new)
            token = CURRENT.set((str(request.id), request.method))
            context()
            dispatcher._finish(dict(result))
            CURRENT.reset(token)

        ctx = context()
        # the admission ladder without its inbound validation (a server of its own)
        unchecked = build_server(validation=Validation(inbound=False), loop_warning=None)
        ladder = unchecked.asgi_app().dispatcher
        inbound = timer(lambda: dispatcher.schemas.violations("CallToolRequest", message), n)
        outbound = timer(lambda: dispatcher._check_result(route, result), n)
        return {
            "parse": timer(lambda: parse_message(body), n),
            "admission": timer(lambda: ladder.admit(request, RoutingHeaders(raw_headers)), n),
            "validation": inbound + outbound,
            "dispatch": timer(dispatch, n),
            "handler": timer(lambda: by_hand(route.handler(ctx, request.params)), n),
            "encode": timer(lambda: encode(result_message(1, result)), n),
        }


# The apps compared, each made only when a mode needs it (a presa app compiles its schemas).
APPS: dict[str, Callable[[], Any]] = {
    "presa-out-on": lambda: build_server(validation=Validation(outbound=True)).asgi_app(),
    "presa-out-off": lambda: build_server(validation=Validation(outbound=False)).asgi_app(),
    "raw": lambda: raw_app.app,
    "raw-in-nursery": lambda: nursery_raw,
    "folded": lambda: folded_app.app,  # presa's checks for this request in one function
}


def instructions(label: str, n: int) -> float:
    """Machine instructions per request of one app, counted by valgrind's callgrind: exact
    for the same binaries, whatever else the machine does, and C work (JSON, validation,
    regular expressions) counts in full. Two runs of this script under valgrind, one with
    ``n`` requests more than the other: the difference is the requests alone (each run also
    pays for starting Python, building the server and the warm-up)."""
    counts = []
    for requests in (100, 100 + n):
        command = [*callgrind.PREFIX, sys.executable, __file__, "--count-one", label,
                   "-n", str(requests)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        counts.append(callgrind.collected(done.stderr))
    return (counts[1] - counts[0]) / n


def warm_and_cold(n: int, runs: int, body: bytes) -> None:
    """``--cold``: every app timed warm (requests back to back, the caches holding what the
    last request left) and cold (``Evictor`` before each request), the apps and the two
    modes taking turns, best of ``runs``; and what presa adds to the raw app either way.
    Under load over HTTP presa's share costs about three times what it costs warm."""
    apps = {label: make() for label, make in APPS.items()}
    for app in apps.values():
        trio.run(drive, app, 500, body)  # warm-up: compile validators, fill caches
    evict = Evictor()
    modes: dict[str, Callable[[], None] | None] = {"warm": None, "cold": evict}
    best = {(label, mode): float("inf") for label in apps for mode in modes}
    for _ in range(runs):
        for label, app in apps.items():
            for mode, between in modes.items():
                seconds = trio.run(drive, app, n, body, None, between)
                best[label, mode] = min(best[label, mode], seconds)
    us = {key: seconds / n * 1e6 for key, seconds in best.items()}
    print(
        f"in-process ASGI, {n} sequential requests a run, warm and cold (the CPU caches"
        f" evicted before each request), in turn, best of {runs} runs, us/request"
    )
    print(f"{'':<15}{'warm':>9}{'cold':>9}")
    for label in apps:
        print(f"{label:<15}{us[label, 'warm']:>9.1f}{us[label, 'cold']:>9.1f}")
    for label in ("presa-out-on", "presa-out-off", "folded"):
        warm, cold = (us[label, mode] - us["raw", mode] for mode in modes)
        print(f"{label} beyond raw: {warm:.1f} us warm, {cold:.1f} us cold ({cold / warm:.1f}x)")
    alone = build_server(validation=Validation(outbound=True), loop_warning=None).asgi_app()
    warm_stages = trio.run(stages, alone, body, 2000)
    cold_stages = trio.run(stages, alone, body, 300, partial(cold_us, evict=evict))
    print("\nstages of presa-out-on timed alone, us (warm: best of 5 x 2,000; cold: median of 300)")
    for stage, warm in warm_stages.items():
        cold = cold_stages[stage]
        print(f"  {stage:<12}{warm:>7.1f}{cold:>7.1f}  ({cold / warm:.1f}x)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "-n", type=int, default=None, help="requests per run (default 5000; 1000 with --cold)"
    )
    ap.add_argument("--runs", type=int, default=8, help="runs per app, in turn (default 8)")
    ap.add_argument("--profile", action="store_true", help="cProfile presa (outbound on)")
    ap.add_argument("--top", type=int, default=15, help="rows of the profile (by self time)")
    ap.add_argument("--opcodes", action="store_true", help="only count opcodes per request")
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="only count machine instructions per request (valgrind; -n 1000 is enough)",
    )
    ap.add_argument(
        "--cold",
        action="store_true",
        help="also time each request after evicting the CPU caches (what load does to them)",
    )
    ap.add_argument("--count-one", metavar="APP", help=argparse.SUPPRESS)  # one app, under valgrind
    args = ap.parse_args()
    if args.n is None:
        args.n = 1000 if args.cold else 5000
    body = request_body("test_simple_text").encode()
    if args.count_one:
        app = APPS[args.count_one]()
        trio.run(drive, app, 50, body)  # warm-up: compile validators, fill caches
        trio.run(drive, app, args.n, body)
        return 0
    if args.instructions:
        if not callgrind.available():
            print(f"asgi_profile: {callgrind.MISSING}")
            return 2
        print(f"Machine instructions per in-process request (callgrind, {args.n:,} requests)")
        for label in APPS:
            print(f"{label:<15}{instructions(label, args.n):>11,.0f}", flush=True)
        return 0
    if args.opcodes:
        print("Python opcodes per in-process request (sys.settrace, deterministic)")
        functions: dict[str, Counter[str]] = {}
        for label, make in APPS.items():
            count, functions[label] = opcodes(make(), body)
            note = "  (the request's nursery)" if label == "raw-in-nursery" else ""
            print(f"{label:<15}{count:>9,.0f}{note}")
        print(f"\ntop {args.top} functions of presa-out-off, opcodes per request")
        for where, total in functions["presa-out-off"].most_common(args.top):
            print(f"  {total / 500:>7,.0f}  {where}")
        return 0
    if args.cold:
        warm_and_cold(args.n, args.runs, body)
        return 0
    apps = {label: make() for label, make in APPS.items()}
    print(
        f"in-process ASGI, {args.n} sequential requests a run, the apps in turn,"
        f" best of {args.runs} runs, us/request"
    )
    for app in apps.values():
        trio.run(drive, app, 500, body)  # warm-up: compile validators, fill caches
    # The apps take turns within each round: this machine's speed swings for seconds at a
    # time, and an app timed in one spell would be compared with another timed in the next.
    best = dict.fromkeys(apps, float("inf"))
    for _ in range(args.runs):
        for label, app in apps.items():
            best[label] = min(best[label], trio.run(drive, app, args.n, body))
    totals = {label: seconds / args.n * 1e6 for label, seconds in best.items()}
    for label, us in totals.items():
        print(f"{label:<15}{us:>9.1f}")
    print(f"presa-out-on / raw: {totals['presa-out-on'] / totals['raw']:.1f}x")
    structure = totals["presa-out-off"] - totals["folded"]
    print(f"presa-out-off beyond folded (what presa's structure costs): {structure:.1f} us")
    # A server of its own: the stage loops block the event loop on purpose (no loop warning).
    alone = build_server(validation=Validation(outbound=True), loop_warning=None).asgi_app()
    parts = {
        "trio: the raw exchange": totals["raw"],  # trio's passes and the exchange
        "trio: the request nursery": totals["raw-in-nursery"] - totals["raw"],
        **trio.run(stages, alone, body, max(args.n // 4, 1000)),
    }
    parts["ASGI edge + the rest"] = totals["presa-out-on"] - sum(parts.values())
    print(
        "\nbreakdown of presa-out-on, us/request (the first two from the raw apps, the stages"
        " timed alone; the last is what is left)"
    )
    for stage, us in parts.items():
        print(f"  {stage:<28}{us:>7.1f}  {us / totals['presa-out-on']:>4.0%}")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        trio.run(drive, apps["presa-out-on"], args.n, body)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).sort_stats("tottime")
        stats.print_stats(args.top)
        # sys.prefix first: the venv may live inside the repository (ROOT/.venv)
        print(out.getvalue().replace(sys.prefix, "<venv>").replace(str(ROOT) + "/", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
