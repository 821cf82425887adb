"""What a task's creation costs on a 2025-11-25 session (``tools/call`` with
``params.task``) beside a 2026-07-28 one (``tools/call`` declaring the Tasks extension), in
process, on the memory store.

Both go through the whole ASGI app (the raw ASGI driver of ``sessions_bench.py``, the same
for both), to a tool whose policy is ``optional`` and which returns at once, so what is
measured is the request, the creation of the record, the launch of the task and its run
beside the next requests. The two kinds run in turn, ``-n`` creations each, ``--runs`` times
(interleaved: a drift of the machine hits both; the kind that goes first alternates); the
figure is the median of the runs with their spread (min-max), in microseconds per creation,
and the ratio session / 2026-07-28 of each run.

    .venv/bin/python bench/legacy_tasks_bench.py            # 3 runs of 2,000 each; ~20 s
    .venv/bin/python bench/legacy_tasks_bench.py -n 5000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import trio
from sessions_bench import post  # beside this file (the script's directory is on sys.path)

from presa_trio import Server
from presa_trio.ext.tasks import TaskLimits, TasksExtension
from presa_trio.testing import Client, SessionClient

UNBOUNDED = TaskLimits(
    max_tasks=None,
    max_stored_per_principal=None,
    max_active_per_principal=None,
    max_stored_bytes=None,
)


def spread(values: list[float], digits: int = 1) -> str:
    """``median (min-max)`` of ``values``."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:,.{digits}f} ({low:,.{digits}f}-{high:,.{digits}f})"


def tasks_app() -> Any:
    server = Server("bench", loop_warning=None)
    server.add_extension(TasksExtension(limits=UNBOUNDED))

    @server.tool(options={"tasks": "optional"})
    def noop() -> str:
        """Answers at once."""
        return "done"

    return server.asgi_app()


class Creator:
    """Sends one kind of task-creating ``tools/call`` to a running app."""

    def __init__(self, app: Any, kind: str) -> None:
        self.app, self.kind = app, kind
        self.body = b""
        self.headers: list[tuple[bytes, bytes]] = []

    async def open(self) -> None:
        params: dict[str, Any] = {"name": "noop", "arguments": {}}
        if self.kind == "modern":
            client = Client(self.app)
            capabilities = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
            message = client.message("tools/call", params, capabilities=capabilities)
            headers = client.headers_for(message)
            await trio.lowlevel.checkpoint()
        else:
            session = SessionClient(self.app)
            await session.initialize()
            message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            message["params"] = {**params, "task": {}}
            headers = session.headers()
        self.headers = [(k.encode(), v.encode()) for k, v in headers]
        self.body = json.dumps(message).encode()

    async def create(self) -> None:
        done = await post(self.app, self.headers, self.body)
        body = done.body_bytes()
        if done.status() != 200 or b'"task' not in body:
            raise RuntimeError(f"no task created ({self.kind}): {body[:200]!r}")


async def one_run(n: int, first: str) -> dict[str, float]:
    """``n`` creations of each kind, the kinds in turn (``first`` first: runs alternate,
    so neither kind always meets the fuller store); us per creation."""
    app = tasks_app()
    async with app.lifespan():
        creators = [Creator(app, kind) for kind in ("modern", "legacy")]
        for creator in creators:
            await creator.open()
            for _ in range(200):  # warm-up: schemas compiled, caches filled
                await creator.create()
        took = {}
        for creator in sorted(creators, key=lambda c: c.kind != first):
            started = time.perf_counter()
            for _ in range(n):
                await creator.create()
            took[creator.kind] = (time.perf_counter() - started) / n * 1e6
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=2000, help="creations of each kind a run")
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs")
    args = ap.parse_args()
    modern, legacy, ratios = [], [], []
    for run in range(args.runs):
        us = trio.run(one_run, args.n, ("modern", "legacy")[run % 2])
        modern.append(us["modern"])
        legacy.append(us["legacy"])
        ratios.append(us["legacy"] / us["modern"])
    print(f"presa_trio legacy tasks bench, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(
        f"task creation in process, memory store ({args.n:,} a kind a run,"
        f" median (min-max) of {args.runs} interleaved runs)"
    )
    print(f"  2026-07-28 tools/call (Tasks declared): {spread(modern)} us/creation")
    print(f"  2025-11-25 tools/call with params.task: {spread(legacy)} us/creation")
    print(f"  session / 2026-07-28:                   {spread(ratios, 3)}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
