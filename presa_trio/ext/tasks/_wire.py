"""Wire projections of a task (SEP-2663): creation, detailed (``tasks/get``) and notification.

Pure functions from a ``TaskRecord`` to the exact JSON shapes, camelCase only here. Times are
UTC ISO 8601 with milliseconds. Nothing here decides what a task does.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from ._states import Status, TaskRecord

EXTENSION_ID = "io.modelcontextprotocol/tasks"


@functools.lru_cache(maxsize=4096)  # a task is polled many times: its stamps format once
def iso(ms: int) -> str:
    """``2026-11-03T18:04:05.123Z`` for an epoch time in milliseconds."""
    seconds, millis = divmod(ms, 1000)
    # gmtime, not an aware datetime: the same UTC fields in less than half the time
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{millis:03d}Z"


def _base(task: TaskRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {"taskId": task.task_id, "status": task.status.value}
    if task.status_message is not None:
        fields["statusMessage"] = task.status_message
    fields["createdAt"] = iso(task.created_ms)
    fields["lastUpdatedAt"] = iso(task.updated_ms)
    fields["ttlMs"] = task.ttl_ms
    if task.poll_interval_ms is not None:
        fields["pollIntervalMs"] = task.poll_interval_ms
    return fields


def creation(task: TaskRecord) -> dict[str, Any]:
    """The ``CreateTaskResult``: a flat Result & Task with ``resultType: "task"``."""
    return {"resultType": "task", **_base(task)}


def _payload(task: TaskRecord) -> dict[str, Any]:
    fields = _base(task)
    if task.status is Status.INPUT_REQUIRED:
        fields["inputRequests"] = {k: dict(v) for k, v in task.input_requests.items()}
    elif task.status is Status.COMPLETED and task.result is not None:
        fields["result"] = dict(task.result)
    elif task.status is Status.FAILED and task.error is not None:
        fields["error"] = dict(task.error)
    return fields


def detailed(task: TaskRecord) -> dict[str, Any]:
    """The ``tasks/get`` result: the DetailedTask with ``resultType: "complete"``."""
    return {"resultType": "complete", **_payload(task)}


def notification(task: TaskRecord) -> dict[str, Any]:
    """``notifications/tasks`` params: the DetailedTask as ``tasks/get`` shows it, no resultType."""
    return _payload(task)
