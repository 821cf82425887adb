"""Test tools for task stores: ``check_task_store`` proves a ``TaskStore`` keeps its
contract, and ``check_lease_store`` a ``LeaseStore`` the leases it adds.

In the spirit of ``trio.testing.check_two_way_stream``: give either a way to open a fresh,
empty store and it runs every rule of the contract against it (see ``TaskStore`` and
``LeaseStore``), raising ``AssertionError`` at the first one broken. It is how presa_trio's
own stores are tested.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from functools import partial
from typing import Any

import trio
import trio.testing

from ...errors import CapacityExceeded
from ._states import Status, TaskRecord
from ._store import LeaseStore, ListingStore, TaskLimits, TaskStore

__all__ = ["check_lease_store", "check_task_store"]

OpenStore = Callable[[], AbstractAsyncContextManager[TaskStore]]
OpenLeaseStore = Callable[[], AbstractAsyncContextManager[LeaseStore]]

_UNLIMITED = TaskLimits(
    max_tasks=None, max_stored_per_principal=None, max_active_per_principal=None
)


def _record(task_id: str, principal: str = "p", **changes: Any) -> TaskRecord:
    record = TaskRecord(
        task_id=task_id,
        principal=principal,
        tool="tool",
        status=Status.WORKING,
        created_ms=1_000,
        updated_ms=1_000,
        ttl_ms=60_000,
        poll_interval_ms=250,
        status_message="Task accepted",
    )
    return replace(record, **changes)


def _moved(record: TaskRecord, **changes: Any) -> TaskRecord:
    return replace(
        record, revision=record.revision + 1, updated_ms=record.updated_ms + 1, **changes
    )


async def check_task_store(open_store: OpenStore) -> None:
    """Run the whole ``TaskStore`` contract against stores made by ``open_store()``.

    ``open_store`` returns an async context manager yielding a fresh, empty store (for an
    in-memory store, ``lambda: contextlib.nullcontext(MemoryTaskStore())`` will do).
    """
    await trio.lowlevel.checkpoint()
    for check in _CHECKS:
        async with open_store() as store:
            await _run(check, store)


async def check_lease_store(open_store: OpenLeaseStore) -> None:
    """Run the ``LeaseStore`` contract (what it adds to ``TaskStore``'s, which
    ``check_task_store`` checks) against stores made by ``open_store()``.

    ``open_store`` returns an async context manager yielding a fresh, empty store.
    """
    await trio.lowlevel.checkpoint()
    for check in _LEASE_CHECKS:
        async with open_store() as store:
            await _run(check, store)


async def _run(check: Callable[[Any], Awaitable[None]], store: TaskStore) -> None:
    try:
        await check(store)
    except AssertionError as failed:
        raise AssertionError(f"{check.__name__.lstrip('_')}: {failed}") from failed


async def _round_trip(store: TaskStore) -> None:
    """A record comes back equal to what was stored, every field of it."""
    assert await store.get("missing") is None, "an unknown id must give None"
    rich = _record(
        "t1",
        status=Status.INPUT_REQUIRED,
        input_requests={"k": {"method": "elicitation/create", "params": {"message": "é ✓"}}},
        used_keys=frozenset({"k", "j"}),
        revision=3,
    )
    await store.create(rich, _UNLIMITED)
    assert await store.get("t1") == rich, "the record read back differs from the one stored"
    done = _record(
        "t2",
        status=Status.COMPLETED,
        ttl_ms=None,
        poll_interval_ms=None,
        status_message=None,
        result={"resultType": "complete", "content": [{"type": "text", "text": "ok"}]},
    )
    await store.create(done, _UNLIMITED)
    assert await store.get("t2") == done, "a completed record read back differs"
    failed = _record("t3", status=Status.FAILED, error={"code": -32603, "message": "x"})
    await store.create(failed, _UNLIMITED)
    assert await store.get("t3") == failed, "a failed record read back differs"
    assert await store.count() == 3


async def _duplicate_ids(store: TaskStore) -> None:
    """Creating an id that exists raises and leaves the stored record as it was."""
    first = _record("dup", tool="first")
    await store.create(first, _UNLIMITED)
    try:
        await store.create(_record("dup", tool="second"), _UNLIMITED)
    except Exception:  # any refusal will do; what matters is the store after
        pass
    else:
        raise AssertionError("creating an existing id did not raise")
    assert await store.get("dup") == first
    assert await store.count() == 1


async def _capacity_limits(store: TaskStore) -> None:
    """``create`` checks the limits in the step that stores; a refusal stores nothing."""
    limits = TaskLimits(max_tasks=3, max_stored_per_principal=None, max_active_per_principal=2)
    await store.create(_record("a1", "alice"), limits)
    await store.create(_record("a2", "alice"), limits)
    await _refused(store, _record("a3", "alice"), limits, "max_active_tasks_per_principal")
    await store.create(_record("b1", "bob"), limits)  # another principal is not held back
    await _refused(store, _record("b2", "bob"), limits, "max_tasks")
    assert await store.count() == 3
    # A task that ends frees its principal's active slot (but still counts as stored).
    a1 = await store.get("a1")
    assert a1 is not None
    assert await store.compare_and_set(_moved(a1, status=Status.COMPLETED), a1.revision)
    await store.create(
        _record("a3", "alice"),
        TaskLimits(max_tasks=4, max_stored_per_principal=None, max_active_per_principal=2),
    )
    assert await store.count() == 4
    # Finished tasks still count against their principal's stored quota, not another's.
    stored = TaskLimits(max_tasks=None, max_stored_per_principal=3, max_active_per_principal=None)
    await _refused(store, _record("a5", "alice"), stored, "max_stored_tasks_per_principal")
    await store.create(_record("b2", "bob"), stored)


async def _refused(store: TaskStore, record: TaskRecord, limits: TaskLimits, limit: str) -> None:
    try:
        await store.create(record, limits)
    except CapacityExceeded as full:
        assert full.limit == limit, f"refused for {full.limit!r}, expected {limit!r}"
    else:
        raise AssertionError(f"{record.task_id} was stored past the {limit} limit")
    assert await store.get(record.task_id) is None, "a refused record was stored"


async def _compare_and_set(store: TaskStore) -> None:
    """A set succeeds only at the current revision, and only for a stored id."""
    record = _record("c")
    await store.create(record, _UNLIMITED)
    newer = _moved(
        record, status=Status.INPUT_REQUIRED, input_requests={"k": {"method": "roots/list"}}
    )
    assert await store.compare_and_set(newer, record.revision), "set at the current revision"
    assert await store.get("c") == newer
    stale = _moved(record, status=Status.FAILED)
    assert not await store.compare_and_set(stale, record.revision), "set at a stale revision"
    assert await store.get("c") == newer, "a failed set changed the record"
    assert not await store.compare_and_set(_record("nope", revision=1), 0), "set of unknown id"
    assert await store.get("nope") is None


async def _concurrent_compare_and_set(store: TaskStore) -> None:
    """Of many concurrent sets at one revision, exactly one wins, and its record is stored."""
    record = _record("race")
    await store.create(record, _UNLIMITED)
    candidates = [_moved(record, status_message=f"writer {i}") for i in range(8)]
    wins: list[TaskRecord] = []

    async def write(candidate: TaskRecord) -> None:
        if await store.compare_and_set(candidate, record.revision):
            wins.append(candidate)

    async with trio.open_nursery() as nursery:
        for candidate in candidates:
            nursery.start_soon(write, candidate)
    assert len(wins) == 1, f"{len(wins)} concurrent compare-and-sets won at one revision"
    assert await store.get("race") == wins[0]


async def _expiry(store: TaskStore) -> None:
    """``delete_expired`` removes exactly the records past ``created + ttl``."""
    await store.create(_record("old", created_ms=0, ttl_ms=100), _UNLIMITED)
    await store.create(_record("edge", created_ms=0, ttl_ms=500), _UNLIMITED)
    await store.create(_record("young", created_ms=400, ttl_ms=1_000), _UNLIMITED)
    await store.create(_record("forever", created_ms=0, ttl_ms=None), _UNLIMITED)
    assert await store.delete_expired(500) == 2, "expired at 500: 'old' and 'edge'"
    assert await store.get("old") is None and await store.get("edge") is None
    assert await store.get("young") is not None and await store.get("forever") is not None
    assert await store.delete_expired(500) == 0
    assert await store.count() == 2
    # A non-terminal task that expires gives its principal's active slot back.
    limits = TaskLimits(max_tasks=None, max_stored_per_principal=3, max_active_per_principal=2)
    await store.create(_record("q1", "q", created_ms=400, ttl_ms=1_000), limits)
    await store.create(_record("q2", "q", created_ms=400, ttl_ms=1_000), limits)
    assert await store.delete_expired(10_000) == 3, "'young', 'q1' and 'q2' expire"
    await store.create(_record("q3", "q"), limits)
    await store.create(_record("q4", "q"), limits)


async def _checkpoints(store: TaskStore) -> None:
    """Every write is a checkpoint, even when the answer is at hand or it refuses; every
    read is a cancellation point (it may answer without yielding)."""
    record = _record("cp")
    with trio.testing.assert_checkpoints():
        await store.create(record, _UNLIMITED)
    reads: dict[str, Callable[[], Awaitable[object]]] = {
        "get of a stored id": partial(store.get, "cp"),
        "get of an unknown id": partial(store.get, "missing"),
        "count": store.count,
    }
    for name, read in reads.items():
        with trio.CancelScope() as scope:
            scope.cancel()
            await read()
        assert scope.cancelled_caught, f"{name} answered in a cancelled scope"
    with trio.testing.assert_checkpoints():
        await store.compare_and_set(_moved(record), record.revision)
    with trio.testing.assert_checkpoints():
        await store.compare_and_set(_moved(record), record.revision)  # stale: refused
    with trio.testing.assert_checkpoints():
        await store.delete_expired(0)


async def _cancellation(store: TaskStore) -> None:
    """A call cancelled at any point leaves the store whole: each effect all or nothing."""
    record = _record("k")
    # Cancelled before it starts: nothing happens.
    with trio.CancelScope() as scope:
        scope.cancel()
        await store.create(record, _UNLIMITED)
    assert await store.get("k") is None, "a create cancelled before it began stored a record"
    await store.create(record, _UNLIMITED)
    newer = _moved(record, status=Status.COMPLETED, result={"content": []})
    with trio.CancelScope() as scope:
        scope.cancel()
        await store.compare_and_set(newer, record.revision)
    assert await store.get("k") == record, "a set cancelled before it began changed the record"
    # Cancelled while under way: the record is the old one or the new one, never a mix.
    for attempt in range(3):
        task_id = f"k{attempt}"
        fresh = _record(task_id)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.create, fresh, _UNLIMITED)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert await store.get(task_id) in (None, fresh), "a cancelled create left half a record"
        if await store.get(task_id) is None:
            await store.create(fresh, _UNLIMITED)
        done = _moved(fresh, status=Status.COMPLETED, result={"content": []})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.compare_and_set, done, fresh.revision)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert await store.get(task_id) in (fresh, done), "a cancelled set left half a record"
    assert await store.count() == 4, "the store is still whole and usable"


async def _listing(store: TaskStore) -> None:
    """A store that lists (``ListingStore``): one principal's unexpired tasks, by id, after
    the id given, at most ``limit``; changes that completed are seen. A store that does not
    list is not asked to."""
    if not isinstance(store, ListingStore):
        await trio.lowlevel.checkpoint()
        return
    for task_id in ("b", "d", "a", "c"):
        await store.create(_record(task_id, "mine"), _UNLIMITED)
    await store.create(_record("e", "theirs"), _UNLIMITED)
    await store.create(_record("f", "mine", created_ms=0, ttl_ms=100), _UNLIMITED)
    await store.create(_record("g", "mine", ttl_ms=None), _UNLIMITED)

    async def ids(after: str | None, limit: int, now_ms: int = 2_000) -> list[str]:
        return [t.task_id for t in await store.list_tasks("mine", after, limit, now_ms)]

    assert await ids(None, 10) == ["a", "b", "c", "d", "g"], "mine, unexpired, by id"
    assert await ids(None, 2) == ["a", "b"], "at most limit"
    assert await ids("b", 2) == ["c", "d"], "after the id given"
    assert await ids("g", 2) == [], "nothing after the last"
    assert await ids(None, 10, 100_000) == ["g"], "expired tasks are left out"
    done = _moved(_record("a", "mine"), status=Status.COMPLETED, result={"content": []})
    assert await store.compare_and_set(done, 0)
    (first,) = await store.list_tasks("mine", None, 1, 2_000)
    assert first == done, "a completed change is seen"
    assert await store.list_tasks("nobody", None, 10, 2_000) == []


_CHECKS = (
    _round_trip,
    _listing,
    _duplicate_ids,
    _capacity_limits,
    _compare_and_set,
    _concurrent_compare_and_set,
    _expiry,
    _checkpoints,
    _cancellation,
)


# ---------------------------------------------------------------------- leases


async def _owners(store: LeaseStore) -> None:
    """The owners are the workers with an unfinished task, each found however many tasks
    it owns and wherever its id sorts; a worker whose tasks all ended is no owner."""
    assert await store.owners() == frozenset(), "an empty store has no owners"
    for n, owner in enumerate(("w1", "w3", "w5", "w5", "w7")):
        await store.create(_record(f"t{n}", owner=owner), _UNLIMITED)
    waiting = _record("asks", owner="w3", status=Status.INPUT_REQUIRED)
    await store.create(waiting, _UNLIMITED)
    for n, status in enumerate((Status.COMPLETED, Status.FAILED, Status.CANCELLED)):
        await store.create(_record(f"done{n}", owner=f"w{2 * n}", status=status), _UNLIMITED)
    assert await store.owners() == {"w1", "w3", "w5", "w7"}, "finished tasks own nothing"
    t0 = await store.get("t0")
    assert t0 is not None
    assert await store.compare_and_set(_moved(t0, status=Status.COMPLETED), t0.revision)
    assert await store.owners() == {"w3", "w5", "w7"}, "w1's one task ended"
    t4 = await store.get("t4")
    assert t4 is not None
    assert await store.compare_and_set(_moved(t4, owner="w5"), t4.revision)
    assert await store.owners() == {"w3", "w5"}, "w7's one task was given to w5"


async def _orphans(store: LeaseStore) -> None:
    """The orphans of some lost workers are exactly their unfinished tasks."""
    for task_id, owner in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c")):
        await store.create(_record(task_id, owner=owner), _UNLIMITED)
    await store.create(_record("a3", owner="a", status=Status.INPUT_REQUIRED), _UNLIMITED)
    await store.create(_record("a-done", owner="a", status=Status.COMPLETED), _UNLIMITED)
    assert await store.orphans(frozenset()) == [], "no one lost: no orphans"
    assert await store.orphans(frozenset({"nobody"})) == [], "a worker with no tasks"
    assert sorted(await store.orphans(frozenset({"a"}))) == ["a1", "a2", "a3"]
    assert sorted(await store.orphans(frozenset({"a", "c", "x"}))) == ["a1", "a2", "a3", "c1"]
    b1 = await store.get("b1")
    assert b1 is not None
    assert await store.compare_and_set(_moved(b1, status=Status.FAILED), b1.revision)
    assert await store.orphans(frozenset({"b"})) == [], "an ended task is no orphan"
    await store.create(_record("old", owner="a", created_ms=0, ttl_ms=1), _UNLIMITED)
    assert sorted(await store.orphans(frozenset({"a"}))) == ["a1", "a2", "a3", "old"]
    assert await store.delete_expired(10) == 1
    assert sorted(await store.orphans(frozenset({"a"}))) == ["a1", "a2", "a3"], "deleted"


async def _lease_reads(store: LeaseStore) -> None:
    """``owners`` and ``orphans`` are reads: cancellation points."""
    await store.create(_record("r", owner="w"), _UNLIMITED)
    reads: dict[str, Callable[[], Awaitable[object]]] = {
        "owners": store.owners,
        "orphans of a lost worker": partial(store.orphans, frozenset({"w"})),
        "orphans of no one": partial(store.orphans, frozenset()),
    }
    for name, read in reads.items():
        with trio.CancelScope() as scope:
            scope.cancel()
            await read()
        assert scope.cancelled_caught, f"{name} answered in a cancelled scope"


_LEASE_CHECKS = (_owners, _orphans, _lease_reads)
