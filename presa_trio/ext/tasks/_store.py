"""Task stores: the contract any store keeps, and the default in-memory store (SEP-2663 §5).

A store keeps ``TaskRecord`` values (plain data) keyed by id: atomic create under capacity
limits, get, compare-and-set by revision, and deletion of expired records. It holds no trio
objects and runs no work; ``presa_trio.ext.tasks.testing.check_task_store`` checks a store
against this contract, so a durable or shared store proves itself the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, final

import trio

from ...errors import CapacityExceeded
from ._states import TaskRecord


@final
@dataclass(frozen=True, slots=True)
class Limits:
    """Capacity limits checked atomically with creation (None: unlimited).

    ``max_stored_per_principal`` counts every stored task of a principal, finished ones too
    (they hold their slot until their TTL), so no principal can fill the whole store and lock
    the others out; ``max_active_per_principal`` bounds the ones still running or parked.
    """

    max_tasks: int | None = 10_000
    max_stored_per_principal: int | None = 1_000
    max_active_per_principal: int | None = 1_000

    def refusal(
        self, stored: int, stored_by_principal: int, active_by_principal: int
    ) -> str | None:
        """Which limit a new task would break, given the counts before it; None if none."""
        if self.max_tasks is not None and stored >= self.max_tasks:
            return "max_tasks"
        per_principal = self.max_stored_per_principal
        if per_principal is not None and stored_by_principal >= per_principal:
            return "max_stored_tasks_per_principal"
        active = self.max_active_per_principal
        if active is not None and active_by_principal >= active:
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
    - ``create`` checks ``limits`` in the same atomic step that stores the record.
    - Records come back equal to what was stored (``TaskRecord`` is plain data).
    """

    async def create(self, task: TaskRecord, limits: Limits) -> None:
        """Store a new task, or raise ``CapacityExceeded`` storing nothing."""

    async def get(self, task_id: str) -> TaskRecord | None:
        """The stored record, expired or not (callers decide what expiry means)."""

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        """Replace the record if its revision is still ``expected_revision``."""

    async def delete_expired(self, now_ms: int) -> int:
        """Delete every record past its TTL; returns how many."""

    async def count(self) -> int:
        """How many records are stored."""


@final
class MemoryTaskStore:
    """The default store: a dict in this process. Tasks die with the process (or the run).

    Each write checkpoints first and then acts without yielding, which is what makes it
    atomic and all-or-nothing under cancellation; each read checks for cancellation and
    answers at once.
    """

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        self._stored: dict[str, int] = {}  # principal -> stored tasks
        self._active: dict[str, int] = {}  # principal -> non-terminal tasks

    async def create(self, task: TaskRecord, limits: Limits) -> None:
        await trio.lowlevel.checkpoint()
        if task.task_id in self._tasks:
            raise ValueError(f"task {task.task_id!r} exists")
        stored = self._stored.get(task.principal, 0)
        active = self._active.get(task.principal, 0)
        refused = limits.refusal(len(self._tasks), stored, active)
        if refused is not None:
            raise CapacityExceeded(refused, "Task capacity exhausted")
        self._tasks[task.task_id] = task
        self._stored[task.principal] = stored + 1
        if not task.terminal:
            self._active[task.principal] = active + 1

    async def get(self, task_id: str) -> TaskRecord | None:
        await trio.lowlevel.checkpoint_if_cancelled()
        return self._tasks.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        await trio.lowlevel.checkpoint()
        current = self._tasks.get(task.task_id)
        if current is None or current.revision != expected_revision:
            return False
        self._tasks[task.task_id] = task
        if task.terminal and not current.terminal:
            _decrement(self._active, task.principal)
        return True

    async def delete_expired(self, now_ms: int) -> int:
        await trio.lowlevel.checkpoint()
        expired = [t for t in self._tasks.values() if t.expired(now_ms)]
        for task in expired:
            del self._tasks[task.task_id]
            _decrement(self._stored, task.principal)
            if not task.terminal:
                _decrement(self._active, task.principal)
        return len(expired)

    async def count(self) -> int:
        await trio.lowlevel.checkpoint_if_cancelled()
        return len(self._tasks)


def _decrement(counts: dict[str, int], principal: str) -> None:
    left = counts.get(principal, 0) - 1
    if left > 0:
        counts[principal] = left
    else:
        counts.pop(principal, None)
