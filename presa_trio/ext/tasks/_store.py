"""Task stores: the interface any store implements, and the default in-memory store.

A store keeps ``TaskRecord`` values (plain data) keyed by id: atomic create under capacity
limits, get, compare-and-set by revision, and deletion of expired records. It holds no trio
objects and runs no work, so a durable or shared store can implement the same interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ._states import TaskRecord


@dataclass(frozen=True, slots=True)
class Limits:
    """Capacity limits checked atomically with creation (None: unlimited)."""

    max_tasks: int | None = 10_000
    max_active_per_scope: int | None = 1_000


class CapacityExceeded(Exception):
    """Creation refused: ``limit`` names which one ("max_tasks", "max_active_tasks_per_scope")."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


class TaskStore(Protocol):
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


class MemoryTaskStore:
    """The default store: a dict in this process. Tasks die with the process."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        self._active: dict[str, int] = {}  # scope -> non-terminal tasks

    async def create(self, task: TaskRecord, limits: Limits) -> None:
        if task.task_id in self._tasks:
            raise ValueError(f"task {task.task_id!r} exists")
        if limits.max_tasks is not None and len(self._tasks) >= limits.max_tasks:
            raise CapacityExceeded("max_tasks")
        active = self._active.get(task.scope, 0)
        if limits.max_active_per_scope is not None and active >= limits.max_active_per_scope:
            raise CapacityExceeded("max_active_tasks_per_scope")
        self._tasks[task.task_id] = task
        if not task.terminal:
            self._active[task.scope] = active + 1

    async def get(self, task_id: str) -> TaskRecord | None:
        return self._tasks.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        current = self._tasks.get(task.task_id)
        if current is None or current.revision != expected_revision:
            return False
        self._tasks[task.task_id] = task
        if task.terminal and not current.terminal:
            self._release(task.scope)
        return True

    async def delete_expired(self, now_ms: int) -> int:
        expired = [t for t in self._tasks.values() if t.expired(now_ms)]
        for task in expired:
            del self._tasks[task.task_id]
            if not task.terminal:
                self._release(task.scope)
        return len(expired)

    async def count(self) -> int:
        return len(self._tasks)

    def _release(self, scope: str) -> None:
        left = self._active.get(scope, 0) - 1
        if left > 0:
            self._active[scope] = left
        else:
            self._active.pop(scope, None)
