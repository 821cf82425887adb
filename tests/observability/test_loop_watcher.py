"""The event-loop watcher: a tool that blocks the event loop is reported once per episode of
blocking while the other requests complete, and there is no watcher when it is switched off."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio import Server, Validation
from presa_trio.testing import open_client


def blocking_server(loop_warning: float | None) -> Server:
    server = Server("blocker", "1", validation=Validation(outbound=True), loop_warning=loop_warning)

    @server.tool()
    async def block() -> str:
        """Blocks the event loop (the mistake the watcher reports)."""
        time.sleep(0.5)  # noqa: ASYNC251 - blocking on purpose
        await trio.lowlevel.checkpoint()
        return "blocked"

    return server


class Warnings(logging.Handler):
    """Counts the watcher's warnings and wakes the test at each one."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.changed = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING and "the event loop was blocked" in (
            record.getMessage()
        ):
            self.records.append(record)
            self.changed.set()
            self.changed = trio.Event()

    async def wait_for(self, count: int) -> None:
        with trio.fail_after(5):
            while len(self.records) < count:
                await self.changed.wait()


@pytest.fixture
def warnings_seen() -> Any:
    handler = Warnings()
    watched = logging.getLogger("presa_trio")
    watched.addHandler(handler)
    try:
        yield handler
    finally:
        watched.removeHandler(handler)


async def test_the_loop_watcher_warns_once_per_episode(warnings_seen: Warnings) -> None:
    async with open_client(blocking_server(0.2), capabilities={}) as client:
        await trio.sleep(0.1)  # the watcher is asleep in its period
        assert warnings_seen.records == []
        await client.call_tool("block", {})
        await warnings_seen.wait_for(1)
        await trio.sleep(0.3)  # several quiet periods: the episode is over
        assert len(warnings_seen.records) == 1
        await client.call_tool("block", {})
        await warnings_seen.wait_for(2)
        await trio.sleep(0.3)
        assert len(warnings_seen.records) == 2
        assert warnings_seen.records[0].name == "presa_trio"


async def test_no_loop_watcher_when_switched_off(warnings_seen: Warnings) -> None:
    async with open_client(blocking_server(None), capabilities={}) as client:
        runtime = client.app.runtime
        assert runtime is not None
        assert runtime.background_count == 0
        await client.call_tool("block", {})
        await trio.sleep(0.3)
    assert warnings_seen.records == []


@pytest.mark.parametrize("phase", [0.0, 0.1], ids=["at-the-watchers-wakeup", "mid-period"])
async def test_a_tool_blocking_the_event_loop_is_reported_once(
    phase: float, caplog: pytest.LogCaptureFixture
) -> None:
    """An ``async`` tool calling ``time.sleep(0.3)`` with ``loop_warning=0.1``: the other
    requests complete after it, and "the event loop was blocked" is logged exactly once,
    wherever the block falls in the watcher's period (real clock)."""
    caplog.set_level(logging.WARNING, logger="presa_trio")
    server = Server("blocking", "1", loop_warning=0.1)
    entered = trio.Event()
    unblocked: list[bool] = []

    @server.tool()
    async def blocker() -> str:
        """Blocks the event loop."""
        entered.set()
        time.sleep(0.3)  # noqa: ASYNC251 - the fault under test
        unblocked.append(True)
        return "blocked"

    async with open_client(server) as client:
        await trio.testing.wait_all_tasks_blocked()  # the watcher has started a period
        await trio.sleep(phase)
        answers: list[str] = []

        async def other() -> None:
            await entered.wait()
            result = await client.discover()
            assert unblocked == [True]  # it was served after the block, not lost
            answers.append(result["resultType"])

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(other)
                blocked = await client.call_tool("blocker")
            await trio.sleep(0.6)  # a few quiet periods: no second report
        assert blocked["content"] == [{"type": "text", "text": "blocked"}]
        assert answers == ["complete"]
    reports = [r for r in caplog.records if "the event loop was blocked" in r.getMessage()]
    assert len(reports) == 1, [r.getMessage() for r in caplog.records]
