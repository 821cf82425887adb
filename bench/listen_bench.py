"""What one notification costs the listen bus as open ``subscriptions/listen`` streams grow.

Opens 1, 10, 100 and 1,000 listeners on one ``SubscriptionBus`` (the run's bus, alone), each
with a filter of one kind: the three list-changed flags, 100 task ids, or 100 watched
resource URIs. Then times ``publish`` of an event that none of them wants (what most
notifications are to most streams) and of one that a single stream wants (drained after
each), in microseconds per publish: the best of five rounds of 2,000. The figure to read is
the ratio to one open stream, printed beside it: an event should cost what it delivers.

    PYTHONPATH=. .venv/bin/python bench/listen_bench.py
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

import trio

from presa_trio._kernel.bus import BusEvent, SubscriptionBus, flag_event, resource_updated_event

STREAMS = (1, 10, 100, 1_000)
ENTRIES = 100  # task ids or URIs in each stream's filter


def filter_of(kind: str, n: int) -> dict[str, Any]:
    if kind == "flags":  # stream 0 alone watches the tools list
        flag = "toolsListChanged" if n == 0 else "promptsListChanged"
        return {flag: True, "resourcesListChanged": True}
    if kind == "taskIds":
        return {"taskIds": [f"task-{n}-{i}" for i in range(ENTRIES)]}
    return {"resourceSubscriptions": [f"file:///srv/{n}/{i}/" for i in range(ENTRIES)]}


def events_of(kind: str) -> tuple[BusEvent, BusEvent]:
    """An event no stream wants, and one that stream 0 wants."""
    if kind == "flags":
        return (
            BusEvent("notifications/message", {}, "loggingMessages"),
            flag_event("notifications/tools/list_changed", "toolsListChanged"),
        )
    if kind == "taskIds":
        return (
            BusEvent("notifications/tasks", {}, "taskIds", "task-none"),
            BusEvent("notifications/tasks", {}, "taskIds", "task-0-7"),
        )
    return (
        resource_updated_event("file:///srv/none/1/readme.md"),
        resource_updated_event("file:///srv/0/7/readme.md"),
    )


async def per_publish(bus: SubscriptionBus, event: BusEvent, drain: Any, rounds: int) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(rounds):
            bus.publish(event)
            drain()
        best = min(best, (time.perf_counter() - started) / rounds)
    return best * 1e6


async def measure(kind: str, streams: int, rounds: int) -> tuple[float, float]:
    bus = SubscriptionBus(max_listeners=None)
    async with AsyncExitStack() as stack:
        listeners = [
            await stack.enter_async_context(bus.listen(n, filter_of(kind, n)))
            for n in range(streams)
        ]
        unwanted, wanted = events_of(kind)
        first = listeners[0]

        def drain() -> None:
            while first.receive_channel.statistics().current_buffer_used:
                first.waiting.clear()
                first.receive_channel.receive_nowait()

        nobody = await per_publish(bus, unwanted, lambda: None, rounds)
        one = await per_publish(bus, wanted, drain, rounds)
        assert bus.publish(wanted) == 1 and bus.publish(unwanted) == 0
    return nobody, one


async def main(args: argparse.Namespace) -> None:
    print(f"listen_bench: python {sys.version.split()[0]}, trio {trio.__version__}")
    print("us per publish, best of 5 x", args.rounds, "(ratio to 1 open stream)")
    for kind in ("flags", "taskIds", "resources"):
        base: tuple[float, float] | None = None
        for streams in STREAMS:
            nobody, one = await measure(kind, streams, args.rounds)
            base = base or (nobody, one)
            print(
                f"  {kind:>9}, {streams:>5,} streams: wanted by none {nobody:8.2f}"
                f" ({nobody / base[0]:6.1f}x)   by one {one:8.2f} ({one / base[1]:6.1f}x)"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2_000)
    trio.run(main, parser.parse_args())
