"""The tasks service of one run (what ``TasksExtension.serve`` starts), and how a request
waiting on a task hears that it changed.

A task's record changes where it runs; a request waiting on it (a 2025-11-25
``tasks/result``) may be on this worker or another. ``TaskChanges`` wakes the waiters here at
once when this worker writes the record; a waiter on another worker reads the store again
after a bounded pause instead. What it does not do: run tasks (``_runner``) or reach other
workers (``_forwarding``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import final

import trio

from ... import Context
from ...extensions import ExtensionContext
from ._forwarding import Forwarder
from ._runner import TaskRunner
from ._shared_meta import SharedMetas
from ._states import TaskRecord
from ._store import TaskStore


@final
class TaskChanges:
    """Waiters on tasks in this worker, woken when the record of theirs is written here."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[trio.Event, int]] = {}  # task id -> (event, waiters)

    def changed(self, task_id: str) -> None:
        """Task ``task_id``'s record was written here: wake its waiters (none: nothing)."""
        found = self._waiting.pop(task_id, None)
        if found is not None:
            found[0].set()

    async def wait(self, task_id: str, seconds: float) -> None:
        """Until the task's record is written here, or ``seconds`` pass."""
        event, waiters = self._waiting.get(task_id, (None, 0))
        if event is None:
            event = trio.Event()
        self._waiting[task_id] = (event, waiters + 1)
        try:
            with trio.move_on_after(seconds):
                await event.wait()
        finally:
            current = self._waiting.get(task_id)
            if current is not None and current[0] is event:
                if current[1] > 1:
                    self._waiting[task_id] = (event, current[1] - 1)
                else:
                    del self._waiting[task_id]

    @property
    def waited_on(self) -> int:
        """How many tasks have a waiter here (0 once every wait ended)."""
        return len(self._waiting)


@final
@dataclass(frozen=True, slots=True)
class TasksService:
    """The tasks service of one run: where its records live and who runs its work."""

    context: ExtensionContext
    store: TaskStore
    runner: TaskRunner
    forwarder: Forwarder  # tasks/update and tasks/cancel, sent where the task runs
    metas: SharedMetas  # the creating requests' _meta, one copy of each for all tasks
    changes: TaskChanges = field(default_factory=TaskChanges)


def require_tool_scopes(run: TasksService, ctx: Context, record: TaskRecord) -> None:
    """A task steered on (answered, cancelled) needs what calling its tool needed: the
    tool's scopes (403 without them, ``presa_trio.auth``). Reading it (``tasks/get``) needs
    only to be its principal."""
    tool = run.context.tool(record.tool)
    if tool is not None and tool.scopes:
        ctx.require_scopes(*tool.scopes)
