"""``await_noticing_wait``: ``await coro`` in the calling task, telling once when ``coro``
first waits; everything past that first step must behave exactly as a plain ``await``."""

from __future__ import annotations

import gc
import types
import weakref
from collections.abc import Generator
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio._transports._first_wait import await_noticing_wait


class Seen:
    def __init__(self) -> None:
        self.waits = 0
        self.steps: list[str] = []

    def on_wait(self) -> None:
        self.waits += 1
        self.steps.append("on_wait")


async def test_a_coroutine_that_never_waits_is_not_noticed() -> None:
    seen = Seen()

    async def at_once() -> int:
        seen.steps.append("ran")
        return 7

    assert await await_noticing_wait(at_once(), seen.on_wait) == 7
    assert seen.steps == ["ran"]


async def test_the_first_wait_is_noticed_once_and_before_it_waits() -> None:
    seen = Seen()
    event = trio.Event()

    async def waits_twice() -> str:
        seen.steps.append("before")
        await event.wait()
        seen.steps.append("between")
        await trio.lowlevel.checkpoint()
        return "done"

    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            await trio.testing.wait_all_tasks_blocked()
            seen.steps.append("blocked")
            event.set()

        nursery.start_soon(watch)
        assert await await_noticing_wait(waits_twice(), seen.on_wait) == "done"
    assert seen.steps == ["before", "on_wait", "blocked", "between"]
    assert seen.waits == 1


async def test_cancellation_reaches_the_coroutine_and_its_cleanup_runs() -> None:
    seen = Seen()

    async def sleeps() -> None:
        try:
            await trio.sleep_forever()
        finally:
            seen.steps.append("cleanup")

    with trio.move_on_after(0.01) as scope:
        await await_noticing_wait(sleeps(), seen.on_wait)
    assert scope.cancelled_caught
    assert seen.steps == ["on_wait", "cleanup"]


async def test_an_error_after_a_wait_propagates_unchanged() -> None:
    async def fails() -> None:
        await trio.lowlevel.checkpoint()
        raise LookupError("after the wait")

    with pytest.raises(LookupError, match="after the wait"):
        await await_noticing_wait(fails(), lambda: None)


async def test_an_error_in_on_wait_closes_the_coroutine() -> None:
    steps: list[str] = []

    async def waits() -> None:
        try:
            await trio.lowlevel.checkpoint()
            steps.append("resumed")  # never: the coroutine is closed at its first wait
        finally:
            steps.append("closed")

    def broken() -> None:
        raise RuntimeError("no watcher today")

    with pytest.raises(RuntimeError, match="no watcher today"):
        await await_noticing_wait(waits(), broken)
    assert steps == ["closed"]
    await trio.lowlevel.checkpoint()


@types.coroutine
def _foreign_yield() -> Generator[str, Any, None]:
    yield "not a trio trap"  # trio throws a TypeError back in, with coro.throw


async def test_an_exception_thrown_in_by_the_scheduler_reaches_the_coroutine() -> None:
    caught: list[BaseException] = []

    async def yields_foreign() -> str:
        try:
            await _foreign_yield()
        except TypeError as exc:
            caught.append(exc)
        await trio.lowlevel.checkpoint()
        return "recovered"

    assert await await_noticing_wait(yields_foreign(), lambda: None) == "recovered"
    assert len(caught) == 1
    assert "unrecognized yield message" in str(caught[0])


def test_closing_the_waiting_awaitable_closes_the_coroutine() -> None:
    steps: list[str] = []

    @types.coroutine
    def suspend() -> Generator[None, Any, None]:
        yield None

    async def inner() -> None:
        try:
            await suspend()
        finally:
            steps.append("closed")

    outer = await_noticing_wait(inner(), lambda: steps.append("waited"))
    outer.send(None)  # type: ignore[attr-defined]
    outer.close()  # type: ignore[attr-defined]
    assert steps == ["waited", "closed"]


class Sent:
    """What trio sends a waiting coroutine: an outcome it unwraps, here an error."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def unwrap(self) -> None:
        error = self.error
        try:
            raise error
        finally:
            del error, self  # as outcome does: no reference of its own survives


@types.coroutine
def _wait() -> Generator[str, Any, None]:
    return (yield "waiting").unwrap()  # type: ignore[no-any-return]


def test_an_exception_sent_in_leaves_no_reference_cycle() -> None:
    # An exception the scheduler sends in (trio's outcome of a cancelled wait) propagates
    # through this frame; had the frame kept the outcome, it would hold the exception, whose
    # traceback holds the frame: a cycle that kept a cancelled request's data (an 8 MB
    # answer) alive until the next GC.
    class Payload:
        pass

    refs: list[weakref.ref[Payload]] = []

    async def holds_a_payload() -> None:
        payload = Payload()
        refs.append(weakref.ref(payload))
        await _wait()

    gc.collect()
    gc.disable()
    try:
        outer = await_noticing_wait(holds_a_payload(), lambda: None)
        assert outer.send(None) == "waiting"  # type: ignore[attr-defined]
        raised = False
        try:
            outer.send(Sent(LookupError("sent in")))  # type: ignore[attr-defined]
        except LookupError:
            raised = True
        assert raised
        assert refs[0]() is None
    finally:
        gc.enable()
