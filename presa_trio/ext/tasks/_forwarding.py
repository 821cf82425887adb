"""Reaching a task wherever it runs: here through the runner, on another worker by asking
that worker through the backend (SEP-2663 §5, on a shared backend).

``tasks/update`` and ``tasks/cancel`` may arrive at any worker; the task's record names its
``owner``. A task that runs here is the runner's; one that runs elsewhere is asked of its
owner (``Backend.call``), bounded, and this worker answers the same asks of the others. What
it does not do: run or settle tasks (``_runner``), or judge which workers are lost
(``_reapers``): an owner that never answers is only a retryable error here, or, for a
cancel, a task recorded cancelled after the bound.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, final

import trio

from ...backends import Backend
from ...errors import ServiceUnavailable
from ._runner import CANCEL_WAIT_SECONDS, TaskRunner

REMOTE_SECONDS = CANCEL_WAIT_SECONDS + 2.0  # bound on asking the worker that runs a task
CANCEL_TOPIC = "tasks.cancel"  # another worker asks this one to cancel a task it runs
DELIVER_TOPIC = "tasks.deliver"  # ... or to deliver answers to a task parked here


@final
class Forwarder:
    """``tasks/update`` and ``tasks/cancel`` for a task, sent where the task runs."""

    def __init__(self, runner: TaskRunner, backend: Backend | None) -> None:
        self.runner = runner
        self.backend = backend

    def answer_other_workers(self) -> None:
        """From now on, answer other workers' asks for the tasks that run here."""
        if self.backend is not None:
            self.backend.on_call(CANCEL_TOPIC, self._answer_cancel)
            self.backend.on_call(DELIVER_TOPIC, self._answer_deliver)

    async def deliver(
        self, task_id: str, responses: Mapping[str, Any], owner: str
    ) -> frozenset[str]:
        """Deliver answers to the task (``TaskRunner.deliver``), where it runs; the keys it
        accepted. A task parked in another worker gets them there: that worker delivers into
        its channels and says which keys it accepted."""
        if self._elsewhere(task_id, owner):
            body = {"taskId": task_id, "responses": dict(responses)}
            reply = await self._ask(owner, DELIVER_TOPIC, body)
            return frozenset(reply["accepted"])
        return await self.runner.deliver(task_id, responses)

    async def cancel(self, task_id: str, owner: str) -> None:
        """Cancel the task (``TaskRunner.cancel``), where it runs. Its owner cancels the scope
        and waits for the cleanup; a lost owner never answers, and the task is recorded
        cancelled here after the bound, as it is once the owner acknowledges."""
        if self._elsewhere(task_id, owner):
            with contextlib.suppress(ServiceUnavailable):
                await self._ask(owner, CANCEL_TOPIC, {"taskId": task_id})
        await self.runner.cancel(task_id)

    def _elsewhere(self, task_id: str, owner: str) -> bool:
        backend = self.backend
        return (
            backend is not None
            and backend.shared
            and owner != backend.worker_id
            and not self.runner.runs(task_id)
        )

    async def _ask(self, owner: str, topic: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Ask the worker running a task, bounded; a worker that does not answer in time
        (lost, or its store failing) is a retryable -32603 (HTTP 503)."""
        assert self.backend is not None
        reply = None
        with trio.move_on_after(REMOTE_SECONDS):
            reply = await self.backend.call(owner, topic, body)
        if reply is None:
            raise ServiceUnavailable("The worker running this task did not answer; retry")
        return reply

    async def _answer_deliver(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        accepted = await self.runner.deliver(body["taskId"], body["responses"])
        return {"accepted": sorted(accepted)}

    async def _answer_cancel(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        await self.runner.cancel(body["taskId"])
        return {"cancelled": True}
