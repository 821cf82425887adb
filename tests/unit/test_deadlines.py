"""The run's keeper of request deadlines (``_transports/_deadlines.py``): never early, at
most two looks late, trio's own deadline whenever no keeper runs."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from presa_trio._transports._deadlines import Deadlines


@pytest.mark.parametrize(
    ("timeouts", "tick"),
    [
        ((30.0, 30.0), 1.0),  # a tenth of the shorter, at most a second
        ((0.5, 30.0), 0.05),
        ((30.0, 2.0), 0.2),
        ((0.001,), 0.001),  # at least a millisecond
        ((math.inf, math.inf), 1.0),
        ((), 1.0),
    ],
)
def test_the_keeper_looks_a_tenth_of_the_shorter_timeout_apart(
    timeouts: tuple[float, ...], tick: float
) -> None:
    assert Deadlines(*timeouts).tick == pytest.approx(tick)


async def test_without_a_keeper_a_deadline_is_trios_own() -> None:
    deadlines = Deadlines(0.5)
    scope = trio.CancelScope()
    deadlines.arm(scope, 0.5)
    assert scope.deadline == pytest.approx(trio.current_time() + 0.5)
    assert not deadlines.passed(scope)
    deadlines.disarm(scope)
    assert scope.deadline == math.inf
    await trio.lowlevel.checkpoint()


@pytest.fixture
def autojump(mock_clock: trio.testing.MockClock) -> trio.testing.MockClock:
    """trio's mock clock, its time passing at once whenever every task waits (pytest-trio
    runs a test on the clock among its arguments)."""
    mock_clock.autojump_threshold = 0
    return mock_clock


@asynccontextmanager
async def kept(*timeouts: float) -> AsyncIterator[Deadlines]:
    """``Deadlines`` for ``timeouts``, kept by a task for as long as the block."""
    deadlines = Deadlines(*timeouts)
    async with trio.open_nursery() as nursery:
        await nursery.start(deadlines.keep)
        yield deadlines
        nursery.cancel_scope.cancel()


def within_two_looks(took: float, seconds: float, tick: float) -> bool:
    """Never before ``seconds``, at most two looks after (float sums aside)."""
    return seconds - 1e-9 <= took <= seconds + 2 * tick + 1e-9


async def cancelled_after(deadlines: Deadlines, seconds: float) -> float:
    """How long a scope armed for ``seconds`` waits before it is cancelled."""
    start = trio.current_time()
    with trio.fail_after(seconds + 60), trio.CancelScope() as scope:
        deadlines.arm(scope, seconds)
        assert scope.deadline == math.inf  # the keeper's, not trio's
        await trio.sleep_forever()
    assert scope.cancelled_caught
    assert deadlines.passed(scope)
    return trio.current_time() - start


async def test_a_kept_deadline_is_never_early_and_at_most_two_looks_late(
    autojump: trio.testing.MockClock,
) -> None:
    async with kept(0.5) as deadlines:  # a look every 0.05 s
        deadlines.arm(trio.CancelScope(), 1000)  # keeps the keeper looking
        for offset in (0.0, 0.01, 0.025, 0.049):  # armed at every point between two looks
            await trio.sleep(offset)
            assert within_two_looks(await cancelled_after(deadlines, 0.5), 0.5, 0.05)


async def test_disarmed_or_rearmed_a_deadline_moves(autojump: trio.testing.MockClock) -> None:
    async with kept(0.5) as deadlines:
        with trio.CancelScope() as lifted:
            deadlines.arm(lifted, 0.5)
            deadlines.disarm(lifted)
            await trio.sleep(5)
        assert not lifted.cancelled_caught
        start = trio.current_time()
        with trio.CancelScope() as moved:
            deadlines.arm(moved, 0.5)
            await trio.sleep(0.3)
            deadlines.arm(moved, 0.5)  # instead of the first
            await trio.sleep_forever()
        assert within_two_looks(trio.current_time() - start, 0.8, 0.05)


async def test_a_scope_cancelled_otherwise_has_not_passed_its_deadline(
    autojump: trio.testing.MockClock,
) -> None:
    async with kept(0.5) as deadlines:
        with trio.CancelScope() as scope:
            deadlines.arm(scope, 0.5)
            scope.cancel()  # a client's disconnect, say
            await trio.sleep_forever()
        assert not deadlines.passed(scope)
        deadlines.disarm(scope)
        infinite = trio.CancelScope()
        deadlines.arm(infinite, math.inf)
        await trio.sleep(60)
        assert not infinite.cancel_called and not deadlines.passed(infinite)


async def test_many_deadlines_fall_in_their_order(autojump: trio.testing.MockClock) -> None:
    fallen: list[float] = []

    async def armed(seconds: float) -> None:
        await cancelled_after(deadlines, seconds)
        fallen.append(seconds)

    async with kept(1.0) as deadlines, trio.open_nursery() as requests:
        for seconds in (3.0, 1.0, 2.0, 1.5):
            requests.start_soon(armed, seconds)
    assert fallen == [1.0, 1.5, 2.0, 3.0]


async def test_an_idle_keeper_does_not_look(autojump: trio.testing.MockClock) -> None:
    async with kept(0.5) as deadlines:
        await cancelled_after(deadlines, 0.5)
        await trio.sleep(0.2)  # it looks once more, finds nothing armed, and waits
        looks = deadlines._looks
        await trio.sleep(100)
        assert deadlines._looks == looks
        assert within_two_looks(await cancelled_after(deadlines, 0.5), 0.5, 0.05)  # woken


async def test_when_the_keeper_stops_trio_takes_every_armed_deadline(
    autojump: trio.testing.MockClock,
) -> None:
    start = trio.current_time()
    with trio.CancelScope() as scope:
        async with kept(0.5) as deadlines:
            deadlines.arm(scope, 0.5)
            await trio.sleep(0.2)
        # the run has ended
        assert within_two_looks(scope.deadline - start, 0.5, 0.05)
        await trio.sleep_forever()
    assert scope.cancelled_caught
    assert deadlines.passed(scope)  # by trio's clock, now
    later = trio.CancelScope()
    deadlines.arm(later, 0.5)  # trio's own from now on
    assert later.deadline == pytest.approx(trio.current_time() + 0.5)
