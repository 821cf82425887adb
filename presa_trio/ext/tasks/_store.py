"""Task stores: the contract any store keeps, and the default in-memory store (SEP-2663 §5).

A store keeps ``TaskRecord`` values (plain data) keyed by id: atomic create under capacity
limits, get, compare-and-set by revision, and deletion of expired records. A store shared by
workers may also keep leases (``LeaseStore``): whose unfinished tasks it holds, so that a
lost worker's can be found. It holds no trio objects and runs no work;
``presa_trio.ext.tasks.testing.check_task_store`` and ``check_lease_store`` check a store
against these contracts, so a durable or shared store proves itself the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, final, runtime_checkable

import trio

from ...errors import CapacityExceeded
from ...extensions import to_json
from ._states import TaskRecord


@final
@dataclass(frozen=True, slots=True)
class TaskLimits:
    """Capacity limits checked atomically with creation (None: unlimited).

    ``max_stored_per_principal`` counts every stored task of a principal, finished ones too
    (they hold their slot until their TTL), so no principal can fill the whole store and lock
    the others out; ``max_active_per_principal`` bounds the ones still running or parked.

    ``max_stored_bytes`` bounds what a store that holds tasks in memory keeps (256 MiB by
    default, where ``max_tasks`` alone let 10,000 results of 256 KiB take 2.5 GB). It counts
    the payloads of every stored record, as the JSON the wire carries: its result, its error
    and its pending input requests (a record holds no input arguments; the rest of it is a
    few hundred bytes, bounded by ``max_tasks``). Results arrive after creation, so each
    task still running or parked also holds ``active_task_reserve_bytes``, what its outcome
    may still add: a creation is refused while the bytes stored plus the reserves of the
    running tasks and the new one would pass the bound. The total held then stays within
    ``max_stored_bytes``, give or take what the server's own code writes beyond a result:
    the questions parked tasks ask and the errors failed tasks keep, counted as they come
    (their size is the tools' doing, not a client's). ``TasksExtension`` sets the reserve
    to its ``max_result_bytes``, the most a result may be (whatever the ``TaskLimits`` it is
    given say); by default at most 1,024 tasks run at once in memory (256 MiB / 256 KiB):
    to run more, raise the bound or lower ``max_result_bytes``. The stores on a database
    (``SqlTaskStore``) keep their records on disk, not in the process, and do not apply this
    bound (the count limits they do).
    """

    max_tasks: int | None = 10_000
    max_stored_per_principal: int | None = 1_000
    max_active_per_principal: int | None = 1_000
    max_stored_bytes: int | None = 268_435_456
    active_task_reserve_bytes: int = 262_144

    def refusal(
        self,
        stored: int,
        stored_by_principal: int,
        active_by_principal: int,
        *,
        stored_bytes: int | None = None,
        active: int = 0,
    ) -> str | None:
        """Which limit a new task would break, given the counts before it; None if none.

        ``stored_bytes`` and ``active`` (every principal's running or parked tasks) are what
        ``max_stored_bytes`` is checked against; a store that does not count bytes passes
        None, and the bound does not apply to it.
        """
        if self.max_tasks is not None and stored >= self.max_tasks:
            return "max_tasks"
        most = self.max_stored_bytes
        if most is not None and stored_bytes is not None:
            reserved = (active + 1) * self.active_task_reserve_bytes
            if stored_bytes + reserved > most:
                return "max_stored_bytes"
        per_principal = self.max_stored_per_principal
        if per_principal is not None and stored_by_principal >= per_principal:
            return "max_stored_tasks_per_principal"
        active_quota = self.max_active_per_principal
        if active_quota is not None and active_by_principal >= active_quota:
            return "max_active_tasks_per_principal"
        return None


class TaskStore(Protocol):
    """What the task runner and the ``tasks/*`` methods need of a store.

    The contract, for every implementation:

    - **Every write is a checkpoint** (``create``, ``compare_and_set`` and ``delete_expired``
      yield to trio once at least, even when the answer is at hand), so callers are correct
      the day a store really waits. **A read is a cancellation point**: ``get`` and ``count``
      raise ``trio.Cancelled`` when their caller is cancelled, and may answer without
      yielding when the answer is at hand (as a sync tool answers without yielding): a
      ``tasks/get`` then costs no scheduler pass. A store that waits to read still may.
    - **Cancellation is all or nothing**: a call cancelled before its effect leaves the store
      unchanged; once the effect happened the call completes. Never half a record.
    - **Compare-and-set is atomic**: of several ``compare_and_set`` calls at the same revision,
      exactly one succeeds, whatever the concurrency.
    - ``create`` checks ``limits`` in the same atomic step that stores the record (the
      count limits; ``max_stored_bytes`` is for stores that hold their records in memory,
      and one that keeps them on disk may ignore it).
    - Records come back equal to what was stored (``TaskRecord`` is plain data).
    """

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        """Store a new task, or raise ``CapacityExceeded`` storing nothing."""

    async def get(self, task_id: str) -> TaskRecord | None:
        """The stored record, expired or not (callers decide what expiry means)."""

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        """Replace the record if its revision is still ``expected_revision``."""

    async def delete_expired(self, now_ms: int) -> int:
        """Delete every record past its TTL; returns how many."""

    async def count(self) -> int:
        """How many records are stored."""


@runtime_checkable
class LeaseStore(TaskStore, Protocol):
    """A ``TaskStore`` that keeps leases: it can say which workers own unfinished tasks
    (each record's ``owner``), and which tasks a set of lost workers leaves behind.

    The Tasks extension fails the unfinished tasks of lost workers whenever the run's store
    is a ``LeaseStore`` and its backend keeps worker leases (``WorkerLeases``); which
    workers are lost is the backend's to judge, which tasks they owned the store's. The
    contract, beside ``TaskStore``'s (``testing.check_lease_store`` checks it):

    - ``owners`` and ``orphans`` are reads: cancellation points, as ``get`` is;
    - they see every write that completed before them: a task created, ended, or given to
      another owner by ``compare_and_set`` counts (or stops counting) from then on, and a
      finished task never counts.
    """

    async def owners(self) -> frozenset[str]:
        """The workers that own at least one unfinished task."""

    async def orphans(self, lost: frozenset[str]) -> list[str]:
        """The ids of the unfinished tasks whose owner is in ``lost``, in any order."""


@runtime_checkable
class ListingStore(TaskStore, Protocol):
    """A ``TaskStore`` that can list one principal's tasks, a page at a time: what the
    2025-11-25 ``tasks/list`` needs. It is a protocol of its own so that a store written
    before it keeps working: without it, a session's ``initialize`` does not declare
    ``tasks.list`` and ``tasks/list`` is -32601. The contract (``testing.check_task_store``
    checks it when a store has the method):

    - a read, a cancellation point, as ``get`` is;
    - the unexpired tasks (``TaskRecord.expired(now_ms)`` false) of ``principal`` whose id
      sorts after ``after`` (all of them for None), ordered by id, at most ``limit``;
    - every write that completed before it is seen.
    """

    async def list_tasks(
        self, principal: str, after: str | None, limit: int, now_ms: int
    ) -> list[TaskRecord]:
        """A page of ``principal``'s tasks, ordered by id, after the id ``after``."""


@runtime_checkable
class InstantStore(TaskStore, Protocol):
    """A ``TaskStore`` whose writes take effect at their first checkpoint and never wait
    after it (``instant``): a store in this process's memory. A write cancelled there
    changes nothing; one past it has taken effect, and returns without yielding again.

    The runner leans on it: a creation needs no shield and no time bound (cancelled at that
    checkpoint, nothing is stored; past it, the work is spawned with no checkpoint between),
    and recording an outcome needs a shield but no deadline (nothing can hang).
    """

    instant: Literal[True]


@final
class MemoryTaskStore:
    """The default store: a dict in this process. Tasks die with the process (or the run).

    Each write checkpoints first and then acts without yielding, which is what makes it
    atomic and all-or-nothing under cancellation; each read checks for cancellation and
    answers at once. It keeps ``TaskLimits.max_stored_bytes``: a record's payloads are
    measured when it is created and when a change replaces one of them (a result, an error,
    a round of input requests), never when it is read; a result the runner measured when it
    checked it (``TaskRecord.result_bytes``) is counted at that size, not written again.
    """

    instant: Literal[True] = True  # every write acts right after its one checkpoint

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        self._stored: dict[str, int] = {}  # principal -> stored tasks
        self._active: dict[str, int] = {}  # principal -> non-terminal tasks
        self._active_total = 0  # non-terminal tasks, every principal's
        self._sizes: dict[str, int] = {}  # task id -> its payload bytes (when not 0)
        self._bytes = 0  # the sum of _sizes

    @property
    def stored_bytes(self) -> int:
        """The payload bytes held, as ``TaskLimits.max_stored_bytes`` counts them."""
        return self._bytes

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        await trio.lowlevel.checkpoint()
        if task.task_id in self._tasks:
            raise ValueError(f"task {task.task_id!r} exists")
        stored = self._stored.get(task.principal, 0)
        active = self._active.get(task.principal, 0)
        size = payload_bytes(task)
        refused = limits.refusal(
            len(self._tasks),
            stored,
            active,
            stored_bytes=self._bytes + size,
            active=self._active_total,
        )
        if refused is not None:
            raise CapacityExceeded(refused, "Task capacity exhausted")
        self._tasks[task.task_id] = task
        self._resize(task.task_id, size)
        self._stored[task.principal] = stored + 1
        if not task.terminal:
            self._active[task.principal] = active + 1
            self._active_total += 1

    async def get(self, task_id: str) -> TaskRecord | None:
        await trio.lowlevel.checkpoint_if_cancelled()
        return self._tasks.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        await trio.lowlevel.checkpoint()
        current = self._tasks.get(task.task_id)
        if current is None or current.revision != expected_revision:
            return False
        self._tasks[task.task_id] = task
        if (  # a change that replaced a payload (most replace none: measured once each)
            task.result is not current.result
            or task.error is not current.error
            or task.input_requests is not current.input_requests
        ):
            self._resize(task.task_id, payload_bytes(task))
        if task.terminal and not current.terminal:
            _decrement(self._active, task.principal)
            self._active_total -= 1
        return True

    async def delete_expired(self, now_ms: int) -> int:
        await trio.lowlevel.checkpoint()
        expired = [t for t in self._tasks.values() if t.expired(now_ms)]
        for task in expired:
            del self._tasks[task.task_id]
            self._resize(task.task_id, 0)
            _decrement(self._stored, task.principal)
            if not task.terminal:
                _decrement(self._active, task.principal)
                self._active_total -= 1
        return len(expired)

    async def count(self) -> int:
        await trio.lowlevel.checkpoint_if_cancelled()
        return len(self._tasks)

    async def list_tasks(
        self, principal: str, after: str | None, limit: int, now_ms: int
    ) -> list[TaskRecord]:
        await trio.lowlevel.checkpoint_if_cancelled()
        # A scan of every record: a store in memory holds at most ``max_tasks`` (10,000)
        mine = sorted(
            (t for t in self._tasks.values() if t.principal == principal
             and not t.expired(now_ms) and (after is None or t.task_id > after)),
            key=lambda t: t.task_id,
        )  # fmt: skip
        return mine[:limit]

    def _resize(self, task_id: str, size: int) -> None:
        self._bytes += size - self._sizes.pop(task_id, 0)
        if size:
            self._sizes[task_id] = size


def payload_bytes(task: TaskRecord) -> int:
    """What ``TaskLimits.max_stored_bytes`` counts of a record: its result, error and pending
    input requests, as JSON. A result the runner measured when it checked it
    (``result_bytes``) is not written again to be measured. A payload that is not JSON (a
    tool may ask with a value the wire would refuse) is counted by its text, so measuring
    never fails a write."""
    size = task.result_bytes
    if size is None:
        size = _json_bytes(task.result)
    return size + _json_bytes(task.error) + _json_bytes(task.input_requests)


def _json_bytes(payload: Mapping[str, Any] | None) -> int:
    if not payload:
        return 0
    try:
        return len(to_json(payload))
    except (ValueError, UnicodeEncodeError, TypeError):
        return len(repr(payload))


def _decrement(counts: dict[str, int], principal: str) -> None:
    left = counts.get(principal, 0) - 1
    if left > 0:
        counts[principal] = left
    else:
        counts.pop(principal, None)
