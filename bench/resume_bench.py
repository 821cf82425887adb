"""What resuming a 2025-11-25 stream costs, on each backend: a call that logged 1,000 messages
(then its answer), resumed from its priming event, in process.

For each store (memory; SQLite, a file; PostgreSQL, a throwaway cluster the bench starts, Unix
socket), a server in process with one session calls a tool that logs ``--events`` messages.
Then the stream is resumed ``--samples`` times from its first id (``Last-Event-ID: S_0``): a
GET that replays every logged message and the answer, read to its end. Beside it, in the same
run, the call itself (every message logged and sent), and the same call on a server with
``Sessions(resumable=False)`` (nothing logged): what logging adds to the call, and what a
resumption costs against the call it replays. Median (min-max) of ``--runs`` runs, the three
measured in turn each run, fresh server and store each run.

    .venv/bin/python bench/resume_bench.py                  # about a minute
    .venv/bin/python bench/resume_bench.py --stores memory,sqlite --events 1000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from presa_trio import Context, Server, Sessions  # noqa: E402
from presa_trio.testing import SessionClient, drive  # noqa: E402


def build(events: int, backend: str | None, resumable: bool) -> Server:
    server = Server("resume-bench", logging=True, loop_warning=None, backend=backend,
                    sessions=Sessions(resumable=resumable))  # fmt: skip

    @server.tool()
    async def talk(ctx: Context) -> str:
        """Logs ``events`` messages, then answers."""
        for n in range(events):
            await ctx.log("info", f"message {n}")
        return "done"

    return server


CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"talk","arguments":{}}}'


async def measure(events: int, samples: int, backend: Callable[[], str | None]) -> dict[str, float]:
    """Medians, ms: the call logged, the call unlogged, a resumption from the first id."""
    figures: dict[str, list[float]] = {"call": [], "call, not resumable": [], "resume": []}
    for resumable in (True, False):
        app = build(events, backend(), resumable).asgi_app()
        async with app.lifespan():
            session = SessionClient(app)
            await session.initialize()
            first = None
            for _ in range(samples):
                started = time.perf_counter()
                done = await drive(app, CALL, session.headers())
                took = (time.perf_counter() - started) * 1000
                assert len(done.messages) == events + 1, len(done.messages)
                figures["call" if resumable else "call, not resumable"].append(took)
                if resumable:
                    first = done.body.split(b"\n", 1)[0].removeprefix(b"id: ").decode()
            if not resumable:
                continue
            assert first is not None
            headers = [(k, v) for k, v in session.headers() if k != "content-type"]
            headers.append(("last-event-id", first))
            for _ in range(samples):
                started = time.perf_counter()
                replay = await drive(app, b"", headers, method="GET")
                figures["resume"].append((time.perf_counter() - started) * 1000)
                assert len(replay.messages) == events + 1, len(replay.messages)
    return {k: statistics.median(v) for k, v in figures.items()}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} ({min(values):,.2f}-{max(values):,.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores", default="memory,sqlite,postgresql")
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=10, help="calls and resumptions a run")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    import presa_trio

    print(f"presa_trio from {Path(presa_trio.__file__).parent}")
    with ExitStack() as stack, tempfile.TemporaryDirectory() as scratch:
        stores: dict[str, Callable[[int], Callable[[], str | None]]] = {}
        if "memory" in args.stores:
            stores["memory"] = lambda run: lambda: None
        if "sqlite" in args.stores:
            counter = iter(range(10**6))
            stores["sqlite"] = lambda run: lambda: f"sqlite:///{scratch}/r{next(counter)}.db"
        if "postgresql" in args.stores:
            from support.postgres_cluster import running_cluster

            cluster = stack.enter_context(running_cluster())
            stores["postgresql"] = lambda run: cluster.new_database
        print(
            f"a stream of {args.events} messages and its answer, ms: median (min-max) of"
            f" {args.runs} runs, each the median of {args.samples}"
        )
        for name, make in stores.items():
            seen: dict[str, list[float]] = {}
            for run in range(args.runs):
                for label, value in trio.run(measure, args.events, args.samples, make(run)).items():
                    seen.setdefault(label, []).append(value)
            plain = statistics.median(seen["call, not resumable"])
            logged = statistics.median(seen["call"]) / plain
            resumed = statistics.median(seen["resume"]) / statistics.median(seen["call"])
            for label, values in seen.items():
                print(f"  {name:>10}  {label:<20} {spread(values)}")
            print(f"  {name:>10}  logging costs the call {logged:.2f}x; a resumption is"
                  f" {resumed:.2f}x the call it replays")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
