"""Per-principal shares on their own: the counts and the refusals that name their bound, and the
thread limiter that keeps a principal to its share of the run's threads.

Threads here are real; the tests prove what they claim by what has entered and what still
waits (``wait_all_tasks_blocked``), never by timing.
"""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from presa_trio._kernel.bus import SubscriptionBus
from presa_trio._kernel.shares import Shares, ThreadShares
from presa_trio.errors import CapacityExceeded

TOOLS = {"toolsListChanged": True}
RETRY = {"retryable": True}


def refusal(shares: Shares, principal: str | None) -> tuple[int, int, object]:
    with pytest.raises(CapacityExceeded) as refused:
        shares.take(principal)
    return refused.value.code, refused.value.http_status, refused.value.data


def test_a_principal_past_its_share_is_refused_naming_the_share() -> None:
    shares = Shares(5, 2, "max_things", "Too many things")
    shares.take("alice")
    shares.take("alice")
    assert refusal(shares, "alice") == (-32603, 503, {**RETRY, "limit": "max_things_per_principal"})
    assert (shares.total, shares.held_by("alice")) == (2, 2)  # the refusal counted nothing
    shares.take("bob")
    assert (shares.total, shares.held_by("bob"), shares.holders) == (3, 1, 2)


def test_the_whole_bound_is_named_first_and_refuses_everyone() -> None:
    shares = Shares(3, 2, "max_things", "Too many things")
    for principal in ("alice", "alice", "bob"):
        shares.take(principal)
    for principal in ("alice", "bob", "carol", None):
        assert refusal(shares, principal)[2] == {**RETRY, "limit": "max_things"}
    assert shares.total == 3 and shares.held_by("carol") == 0 and shares.holders == 2


def test_the_servers_own_work_counts_in_the_total_only() -> None:
    shares = Shares(3, 1, "max_things", "Too many things")
    shares.take(None)
    shares.take(None)
    assert (shares.total, shares.holders) == (2, 0)
    shares.take("alice")
    assert refusal(shares, None)[2] == {**RETRY, "limit": "max_things"}
    shares.give_back(None)
    assert refusal(shares, "alice")[2] == {**RETRY, "limit": "max_things_per_principal"}


def test_giving_back_frees_the_place_and_forgets_a_principal_holding_nothing() -> None:
    shares = Shares(None, 1, "max_things", "Too many things")
    shares.take("alice")
    shares.give_back("alice")
    assert (shares.total, shares.holders, shares.held_by("alice")) == (0, 0, 0)
    shares.take("alice")
    assert shares.held_by("alice") == 1


def test_no_bound_and_no_share_refuse_nothing() -> None:
    shares = Shares(None, None, "max_things", "Too many things")
    for _ in range(1_000):
        shares.take("alice")
    assert (shares.total, shares.held_by("alice")) == (1_000, 1_000)


async def test_the_bus_bounds_each_principals_streams_until_their_blocks_end() -> None:
    bus = SubscriptionBus(max_listeners=3, max_listeners_per_principal=2)
    async with bus.listen(1, TOOLS, "alice"), bus.listen(2, TOOLS, "alice"):
        with pytest.raises(CapacityExceeded) as refused:
            async with bus.listen(3, TOOLS, "alice"):
                pytest.fail("a third stream of alice was admitted")
        assert refused.value.limit == "max_listen_streams_per_principal"
        async with bus.listen(4, TOOLS, "bob"):
            with pytest.raises(CapacityExceeded) as full:
                async with bus.listen(5, TOOLS, "carol"):
                    pytest.fail("a fourth stream was admitted")
            assert full.value.limit == "max_listen_streams"
            assert bus.listener_count == 3
        assert bus.streams.total == 2 and bus.streams.held_by("bob") == 0
    assert (bus.streams.total, bus.streams.holders, bus.listener_count) == (0, 0, 0)


async def test_a_stream_keeps_its_place_after_the_bus_ended_it() -> None:
    bus = SubscriptionBus(max_listeners=None, max_listeners_per_principal=1)
    async with bus.listen(1, TOOLS, "alice") as listener:
        bus.close()
        with pytest.raises(trio.EndOfChannel):
            await listener.receive()
        assert bus.listener_count == 0 and bus.streams.held_by("alice") == 1
    assert bus.streams.held_by("alice") == 0


# ------------------------------------------------------------------ threads


class Gates:
    """Sync work that says when it entered its thread and leaves when its gate opens."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self.finished: dict[str, trio.Event] = {}
        self._changed = threading.Condition()

    def work(self, tag: str) -> str:
        with self._changed:
            self.entered.append(tag)
            self._changed.notify_all()
        assert self.gates.setdefault(tag, threading.Event()).wait(10), f"{tag} never released"
        return tag

    def release(self, tag: str) -> None:
        self.gates.setdefault(tag, threading.Event()).set()

    def _wait(self, tags: set[str], count: int) -> bool:
        with self._changed:
            return self._changed.wait_for(
                lambda: tags <= set(self.entered) and len(self.entered) >= count, 10
            )

    async def until(self, *tags: str, count: int = 0) -> None:
        """Until ``tags`` (or any ``count`` tags) have entered their threads, and all else
        waits."""
        assert await trio.to_thread.run_sync(self._wait, set(tags), count), self.entered
        await trio.testing.wait_all_tasks_blocked()


async def run_in(shares: ThreadShares, principal: str, gates: Gates, tag: str) -> None:
    done = gates.finished.setdefault(tag, trio.Event())
    limiter = shares.limiter_for(principal)
    assert await trio.to_thread.run_sync(gates.work, tag, limiter=limiter) == tag
    done.set()


async def test_past_its_share_a_principal_waits_while_others_take_the_free_threads() -> None:
    limiter = trio.CapacityLimiter(3)
    shares = ThreadShares(limiter, 2)
    gates = Gates()
    async with trio.open_nursery() as nursery:
        for tag in ("a1", "a2", "a3"):
            nursery.start_soon(run_in, shares, "alice", gates, tag)
        await gates.until(count=2)
        first, second = gates.entered
        (waiting,) = {"a1", "a2", "a3"} - {first, second}  # for alice's share
        assert limiter.borrowed_tokens == 2  # without holding a thread of the run
        nursery.start_soon(run_in, shares, "bob", gates, "b1")
        await gates.until("b1")
        assert waiting not in gates.entered and limiter.borrowed_tokens == 3
        gates.release("b1")
        with trio.fail_after(10):
            await gates.finished["b1"].wait()
        await trio.testing.wait_all_tasks_blocked()
        assert limiter.borrowed_tokens == 2
        assert waiting not in gates.entered  # a thread is free, but not alice's to take
        gates.release(first)
        await gates.until(waiting)
        gates.release(second)
        gates.release(waiting)
    assert (limiter.borrowed_tokens, shares.principals) == (0, 0)


async def test_a_cancelled_wait_for_a_share_leaves_nothing_behind() -> None:
    limiter = trio.CapacityLimiter(2)
    shares = ThreadShares(limiter, 1)
    gates = Gates()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_in, shares, "alice", gates, "a1")
        await gates.until("a1")
        async with trio.open_nursery() as waiting:
            waiting.start_soon(run_in, shares, "alice", gates, "a2")
            await trio.testing.wait_all_tasks_blocked()  # a2 waits for alice's share
            waiting.cancel_scope.cancel()
        assert gates.entered == ["a1"]
        assert (limiter.borrowed_tokens, shares.principals) == (1, 1)
        gates.release("a1")
    assert (limiter.borrowed_tokens, shares.principals) == (0, 0)


async def test_a_cancelled_wait_for_the_runs_threads_gives_the_share_back() -> None:
    limiter = trio.CapacityLimiter(1)
    shares = ThreadShares(limiter, 1)
    gates = Gates()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_in, shares, "bob", gates, "b1")
        await gates.until("b1")
        async with trio.open_nursery() as waiting:
            waiting.start_soon(run_in, shares, "alice", gates, "a1")
            await trio.testing.wait_all_tasks_blocked()  # alice's share taken, the run's full
            assert (limiter.borrowed_tokens, shares.principals) == (1, 2)
            waiting.cancel_scope.cancel()
        assert (limiter.borrowed_tokens, shares.principals) == (1, 1)  # bob's only
        gates.release("b1")
    assert gates.entered == ["b1"] and shares.principals == 0


async def test_an_abandoned_thread_keeps_its_share_until_it_returns() -> None:
    limiter = trio.CapacityLimiter(2)
    shares = ThreadShares(limiter, 1)
    gates = Gates()
    own = shares.limiter_for("alice")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def abandoned() -> None:
                work = gates.work
                await trio.to_thread.run_sync(work, "a1", limiter=own, abandon_on_cancel=True)

            nursery.start_soon(abandoned)
            await gates.until("a1")
            scope.cancel()
    assert (limiter.borrowed_tokens, shares.principals) == (1, 1)  # the thread still runs
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_in, shares, "alice", gates, "a2")
        nursery.start_soon(run_in, shares, "bob", gates, "b1")
        await gates.until("b1")
        assert "a2" not in gates.entered
        gates.release("a1")  # the abandoned thread returns: alice's place comes back
        await gates.until("a2")
        gates.release("a2")
        gates.release("b1")
    assert (limiter.borrowed_tokens, shares.principals) == (0, 0)


def test_without_a_share_every_principal_gets_the_runs_own_limiter() -> None:
    limiter = trio.CapacityLimiter(3)
    assert ThreadShares(limiter, None).limiter_for("alice") is limiter


def test_the_anonymous_principal_holds_no_share_only_the_total() -> None:
    shares = Shares(3, 1, "max_things", "Too many things")
    for _ in range(3):
        shares.take("")
    assert (shares.total, shares.holders, shares.held_by("")) == (3, 0, 0)
    assert refusal(shares, "")[2] == {**RETRY, "limit": "max_things"}
    shares.give_back("")
    shares.take("alice")
    assert refusal(shares, "alice")[2] == {**RETRY, "limit": "max_things"}
    limiter = trio.CapacityLimiter(3)
    assert ThreadShares(limiter, 1).limiter_for("") is limiter
