"""A group that mixes ``trio.Cancelled`` with an error, at an error boundary: presa_trio's
boundaries log the error and raise the ``Cancelled`` part again; hypercorn 0.18's request
boundary drops it (what docs/cancellation.md, section 7, says of both). Also what the guide
says of level-triggered cancellation, against asyncio's model."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
import trio
import trio.testing
from hypercorn.config import Config
from hypercorn.trio.task_group import _handle

from presa_trio.errors import InternalError
from presa_trio.extensions import error_boundary, protocol_error


async def fails_in_cleanup() -> None:
    try:
        await trio.sleep_forever()
    finally:
        raise OSError("could not close the upstream connection")


async def mixed_group(scope: trio.CancelScope) -> None:
    """Raise a group holding both the ``Cancelled`` of ``scope`` and an ``OSError``."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fails_in_cleanup)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
        await trio.sleep_forever()


@contextmanager
def through_protocol_error() -> Iterator[None]:
    try:
        yield
    except BaseException as exc:
        error = protocol_error(exc, "the test's work")
        raise AssertionError(f"a mixed group must not become an error: {error}") from None


BOUNDARIES: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "error_boundary": lambda: error_boundary("the test's work"),
    "protocol_error": through_protocol_error,
}


@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_presa_boundaries_raise_the_cancelled_part_of_a_mixed_group(
    boundary: str, caplog: pytest.LogCaptureFixture
) -> None:
    ran_on = []
    with trio.CancelScope() as scope:
        with BOUNDARIES[boundary]():
            await mixed_group(scope)
        ran_on.append("after the boundary")
    assert scope.cancelled_caught  # the owner caught its own cancellation
    assert ran_on == []  # nothing after the boundary ran for cancelled work
    logged = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in logged] == ["the test's work failed"]
    assert logged[0].exc_info is not None
    leaves = logged[0].exc_info[1]
    assert isinstance(leaves, ExceptionGroup)
    assert [type(e) for e in leaves.exceptions] == [OSError]


async def test_protocol_error_turns_an_error_alone_into_an_internal_error() -> None:
    with trio.CancelScope() as scope:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fails_in_cleanup)
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()  # the nursery's own: caught inside
        except BaseException as exc:
            error = protocol_error(exc, "the test's work")
    assert not scope.cancelled_caught
    assert isinstance(error, InternalError) and error.code == -32603


async def test_hypercorn_handle_drops_the_cancelled_part_of_a_mixed_group() -> None:
    """hypercorn/trio/task_group.py ``_handle``: a group with anything besides Cancelled is
    logged and dropped whole; the scope never sees its cancellation delivered, and the code
    after the boundary runs until its next checkpoint raises again (level-triggered)."""
    sent: list[object] = []

    async def app(scope: object, receive: object, send: object, *spawns: object) -> None:
        await mixed_group(cancel_scope)

    async def send(message: object) -> None:
        sent.append(message)

    ran_on = []
    with trio.CancelScope() as cancel_scope:
        await _handle(app, Config(), {}, None, send, None, None)  # type: ignore[arg-type]
        ran_on.append("after the boundary")  # runs: the Cancelled was dropped
        await trio.lowlevel.checkpoint()  # ...and the scope is still cancelled
        ran_on.append("never")
    assert ran_on == ["after the boundary"]
    assert cancel_scope.cancelled_caught  # caught again, at the next checkpoint
    assert sent == [None, None]  # the error path closed the response (twice)


async def test_hypercorn_handle_raises_a_group_of_nothing_but_cancelled() -> None:
    async def app(scope: object, receive: object, send: object, *spawns: object) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            cancel_scope.cancel()
            await trio.sleep_forever()

    async def send(message: object) -> None:
        await trio.lowlevel.checkpoint()

    ran_on = []
    with trio.CancelScope() as cancel_scope:
        await _handle(app, Config(), {}, None, send, None, None)  # type: ignore[arg-type]
        ran_on.append("after the boundary")
    assert ran_on == [] and cancel_scope.cancelled_caught


def test_asyncio_delivers_a_cancellation_once() -> None:
    """The model the guide contrasts with trio's: a caught CancelledError is consumed."""
    seen = []

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("swallowed")
        await asyncio.sleep(0)  # no second cancellation here
        seen.append("ran on")

    async def main() -> None:
        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        task.cancel()
        await task

    asyncio.run(main())
    assert seen == ["swallowed", "ran on"]
