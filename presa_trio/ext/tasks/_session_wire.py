"""Wire shapes of a task on an older-era session (spec 2025-11-25 basic/utilities/tasks).

Pure functions from a ``TaskRecord`` to the 2025-11-25 ``Task`` and the results built on it,
the ``tasks`` capability, each tool's ``execution.taskSupport``, and the opaque cursor of
``tasks/list``. camelCase only here. Nothing here decides what a task does: one record, one
store and one runner serve both eras; this module only writes a record the older way.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from ._states import Status, TaskRecord
from ._wire import iso

#: The protocol versions whose sessions have tasks (2025-06-18 had none).
VERSIONS = frozenset({"2025-11-25"})
RELATED_TASK = "io.modelcontextprotocol/related-task"
#: A task policy (``TasksExtension``) as a tool's ``execution.taskSupport``; a policy
#: function decides per call, so the tool may run either way: "optional".
TASK_SUPPORT = {"sync": "forbidden", "optional": "optional", "required": "required"}
_CURSOR_VERSION = 1


def capabilities(*, listing: bool) -> dict[str, Any]:
    """``ServerCapabilities.tasks``: task-augmented ``tools/call``, ``tasks/cancel``, and
    ``tasks/list`` when the store can list."""
    tasks: dict[str, Any] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
    if listing:
        tasks["list"] = {}
    return {"tasks": tasks}


def status_of(task: TaskRecord) -> str:
    """The 2025-11-25 status: a completed tool call whose result is an error is ``failed``
    there ("this includes cases where the tool call result has isError set to true")."""
    if task.status is Status.COMPLETED and task.result is not None and task.result.get("isError"):
        return Status.FAILED.value
    return task.status.value


def task(record: TaskRecord) -> dict[str, Any]:
    """The ``Task``: what ``tasks/get``, ``tasks/cancel`` and ``tasks/list`` show of it."""
    fields: dict[str, Any] = {"taskId": record.task_id, "status": status_of(record)}
    if record.status_message is not None:
        fields["statusMessage"] = record.status_message
    fields["createdAt"] = iso(record.created_ms)
    fields["lastUpdatedAt"] = iso(record.updated_ms)
    fields["ttl"] = record.ttl_ms
    if record.poll_interval_ms is not None:
        fields["pollInterval"] = record.poll_interval_ms
    return fields


def creation(record: TaskRecord) -> dict[str, Any]:
    """The ``CreateTaskResult`` a task-augmented ``tools/call`` answers."""
    return {"task": task(record)}


def related(task_id: str) -> dict[str, Any]:
    """The ``_meta`` entry that ties a message to its task."""
    return {RELATED_TASK: {"taskId": task_id}}


def payload(result: Mapping[str, Any], task_id: str) -> dict[str, Any]:
    """A completed task's result as ``tasks/result`` answers it: the tool's result, with
    the related-task ``_meta`` (the result itself does not name its task)."""
    answered = dict(result)
    meta = answered.get("_meta")
    answered["_meta"] = {**(meta if isinstance(meta, dict) else {}), **related(task_id)}
    return answered


def with_related_task(
    requests: Mapping[str, Mapping[str, Any]], task_id: str
) -> dict[str, dict[str, Any]]:
    """A task's input requests as pushed to the client: each names its task in ``_meta``."""
    tied: dict[str, dict[str, Any]] = {}
    for key, request in requests.items():
        params = dict(request.get("params") or {})
        meta = params.get("_meta")
        params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **related(task_id)}
        tied[key] = {**request, "params": params}
    return tied


# ---------------------------------------------------------------------------- cursors


def _tag(principal: str, body: bytes) -> str:
    """A cursor's tag: keyed by the principal, so one principal's cursor is refused from
    another, and an edited cursor is refused from anyone. It is not secret: a client that
    forges a tag for itself only moves within its own list."""
    key = hashlib.sha256(principal.encode()).digest()
    digest = hmac.new(key, body, hashlib.sha256).digest()[:12]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def encode_cursor(principal: str, after: str) -> str:
    """The cursor that continues ``principal``'s list after the task id ``after``."""
    body = json.dumps([_CURSOR_VERSION, after], separators=(",", ":")).encode()
    text = base64.urlsafe_b64encode(body).decode().rstrip("=")
    return f"{text}.{_tag(principal, body)}"


def decode_cursor(principal: str, cursor: str) -> str | None:
    """The task id a cursor continues after; None for a cursor that is not one of
    ``principal``'s (edited, foreign or junk)."""
    text, _, tag = cursor.partition(".")
    try:
        body = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        version, after = json.loads(body)
    except (ValueError, TypeError):
        return None
    if version != _CURSOR_VERSION or not isinstance(after, str):
        return None
    if not hmac.compare_digest(tag, _tag(principal, body)):
        return None
    return after
