"""The task runner: each task a nursery with its own cancel scope, parked inputs on channels.

One runner nursery, owned by the server's lifespan, holds every task. A task is started with
``nursery.start`` and lives in a nursery of its own whose cancel scope ``tasks/cancel``
cancels, after committing ``cancelled`` (so a late result cannot resurrect it). A tool that
needs input parks on one memory channel per key; ``tasks/update`` delivers into them. The
task never sees its creating request's disconnect: it belongs to this runner, not to it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from ...errors import InternalError, McpError
from ._states import (
    Cancelled,
    Completed,
    Event,
    Failed,
    InputRequested,
    InputsAccepted,
    TaskRecord,
    apply,
)
from ._store import TaskStore

logger = logging.getLogger("presa_trio.tasks")

Work = Callable[["TaskHandle"], Awaitable[Mapping[str, Any]]]
Publish = Callable[[TaskRecord], None]

CANCEL_WAIT_SECONDS = 5.0  # how long tasks/cancel waits for the tool's cleanup before acking
COMMIT_SECONDS = 5.0  # bound on a shielded final commit while being cancelled


@dataclass(eq=False, slots=True)
class _Live:
    """The trio side of one running task; never stored."""

    scope: trio.CancelScope | None = None  # the task nursery's, once it runs
    cancelled: bool = False  # a cancel that arrived before the task first ran
    done: trio.Event = field(default_factory=trio.Event)
    parked: dict[str, trio.MemorySendChannel[Any]] = field(default_factory=dict)


class TaskHandle:
    """What a running task's work sees: its id and a way to park on input."""

    __slots__ = ("_live", "_runner", "answered", "task_id")

    def __init__(self, runner: TaskRunner, task_id: str, live: _Live, answered: Mapping[str, Any]):
        self._runner = runner
        self._live = live
        self.task_id = task_id
        # Answers the creating request already carried (MRTR before creation, T§6.2).
        self.answered = dict(answered)

    async def provide(self, ctx: Any, requests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """``Context.input`` inside a task: park until every request has an answer.

        The task shows the pending requests as ``inputRequests`` until ``tasks/update``
        delivers into their channels.
        """
        found = {k: self.answered[k] for k in requests if k in self.answered}
        missing = {k: v for k, v in requests.items() if k not in found}
        if not missing:
            return found
        receivers: dict[str, trio.MemoryReceiveChannel[Any]] = {}
        for key in missing:
            send, receive = trio.open_memory_channel[Any](1)
            self._live.parked[key] = send
            receivers[key] = receive
        try:
            await self._runner.commit(self.task_id, InputRequested(missing))
            for key, receive in receivers.items():
                found[key] = await receive.receive()
        finally:
            for key, receive in receivers.items():
                receive.close()
                self._live.parked.pop(key, None)
        return found


class TaskRunner:
    """Runs task work in its own nursery; commits every state change through the store."""

    def __init__(
        self, store: TaskStore, now_ms: Callable[[], int], publish: Publish | None = None
    ) -> None:
        self.store = store
        self.now_ms = now_ms
        self.publish = publish
        self._nursery: trio.Nursery | None = None
        self._live: dict[str, _Live] = {}

    @property
    def nursery(self) -> trio.Nursery:
        if self._nursery is None:
            raise RuntimeError("the task runner is not running (is the server's lifespan on?)")
        return self._nursery

    @property
    def live_count(self) -> int:
        return len(self._live)

    def parked_count(self) -> int:
        return sum(len(live.parked) for live in self._live.values())

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the runner nursery until cancelled (at server shutdown every task is cancelled)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def start(
        self, record: TaskRecord, work: Work, answered: Mapping[str, Any] | None = None
    ) -> None:
        """Start ``work`` for an already stored task, as a child of the runner nursery.

        The task is registered before this returns, so a ``tasks/cancel`` that arrives before
        it first runs still reaches it.
        """
        live = _Live()
        self._live[record.task_id] = live
        self.nursery.start_soon(self._run, record, work, dict(answered or {}), live)

    async def _run(
        self, record: TaskRecord, work: Work, answered: dict[str, Any], live: _Live
    ) -> None:
        outcome: Event = Cancelled("Task stopped before it finished")
        try:
            async with trio.open_nursery() as task_nursery:  # the task's own nursery and scope
                live.scope = task_nursery.cancel_scope
                if live.cancelled:  # cancelled before it ever ran: the work never starts
                    return
                if record.ttl_ms is not None:  # work never outlives the task's TTL
                    deadline_ms = record.created_ms + record.ttl_ms - self.now_ms()
                    live.scope.deadline = trio.current_time() + deadline_ms / 1000
                handle = TaskHandle(self, record.task_id, live, answered)
                try:
                    outcome = Completed(dict(await work(handle)))
                except McpError as error:  # a protocol error: the task fails with it inlined
                    outcome = Failed(error.to_error())
                except Exception:  # a bug in the work: fail without leaking detail (T§5.1)
                    logger.exception("task %s raised", record.task_id)
                    outcome = Failed(InternalError("Internal error").to_error())
        finally:
            for send in live.parked.values():  # release any channel still parked
                send.close()
            live.parked.clear()
            with trio.move_on_after(COMMIT_SECONDS, shield=True):
                await self.commit(record.task_id, outcome)
            del self._live[record.task_id]
            live.done.set()

    async def commit(self, task_id: str, event: Event) -> TaskRecord | None:
        """Apply ``event`` with compare-and-set, retrying on conflict; None if the task is gone."""
        while True:
            current = await self.store.get(task_id)
            if current is None:
                return None
            updated = apply(current, event, self.now_ms())
            if updated is current:
                return current
            if await self.store.compare_and_set(updated, current.revision):
                if self.publish is not None:
                    self.publish(updated)
                return updated

    async def deliver(self, task_id: str, responses: Mapping[str, Any]) -> None:
        """``tasks/update``: accept the answers to pending keys and wake their waiters."""
        live = self._live.get(task_id)
        if live is None:
            return
        current = await self.store.get(task_id)
        if current is None:
            return
        keys = frozenset(responses) & current.input_requests.keys() & live.parked.keys()
        if not keys:
            return
        await self.commit(task_id, InputsAccepted(keys))
        for key in keys:
            send = live.parked.pop(key, None)
            if send is not None:
                send.send_nowait(responses[key])

    async def cancel(self, task_id: str) -> None:
        """``tasks/cancel``: commit ``cancelled``, cancel the task's scope, wait (bounded)."""
        await self.commit(task_id, Cancelled())
        live = self._live.get(task_id)
        if live is None:
            return
        live.cancelled = True
        if live.scope is not None:
            live.scope.cancel()
        with trio.move_on_after(CANCEL_WAIT_SECONDS):
            await live.done.wait()
