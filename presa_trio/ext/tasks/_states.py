"""The task state machine (SEP-2663): statuses, events and one pure ``apply``.

A ``TaskRecord`` is plain, immutable data (no trio objects), so any store can keep it. The
transition table is data a reader can audit; terminal states are sticky, so a late result
can never resurrect a cancelled task. Input keys are unique for a task's whole life. How a
task ended is an event of its own (cancelled by a client, expired, stopped with the server),
even where two of them land in the same wire status.
"""

from __future__ import annotations

import enum
import functools
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, final

from ...errors import InternalError


class Status(enum.StrEnum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})

# Which statuses each status may move to (SEP-2663 §Task Status).
TRANSITIONS: Mapping[Status, frozenset[Status]] = {
    Status.WORKING: frozenset(
        {Status.INPUT_REQUIRED, Status.COMPLETED, Status.FAILED, Status.CANCELLED}
    ),
    Status.INPUT_REQUIRED: frozenset(
        {Status.WORKING, Status.COMPLETED, Status.FAILED, Status.CANCELLED}
    ),
    Status.COMPLETED: frozenset(),
    Status.FAILED: frozenset(),
    Status.CANCELLED: frozenset(),
}


class InvalidTransition(InternalError):
    """A state change the table does not allow: a bug in the caller, answered -32603."""


class KeyReused(InvalidTransition):
    """An input key was asked for twice in one task's life."""


@final
@dataclass(frozen=True, slots=True)
class TaskRecord:
    """Everything stored about one task. Times are integer milliseconds since the epoch.

    ``principal`` is who the task belongs to: another principal's task is invisible.
    ``owner`` is the worker running it (its backend's ``worker_id``): where a cancel or an
    answer for it must go, and whose loss fails it.
    """

    task_id: str
    principal: str
    tool: str
    status: Status
    created_ms: int
    updated_ms: int
    ttl_ms: int | None
    poll_interval_ms: int | None
    status_message: str | None = None
    input_requests: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    used_keys: frozenset[str] = frozenset()
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    revision: int = 0
    owner: str = ""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def expired(self, now_ms: int) -> bool:
        """Past ``createdAt + ttlMs`` (never for an unlimited TTL)."""
        return self.ttl_ms is not None and now_ms >= self.created_ms + self.ttl_ms


# ---------------------------------------------------------------------- events


@final
@dataclass(frozen=True, slots=True)
class InputRequested:
    requests: Mapping[str, Mapping[str, Any]]


@final
@dataclass(frozen=True, slots=True)
class InputsAccepted:
    keys: frozenset[str]


@final
@dataclass(frozen=True, slots=True)
class InputsWithdrawn:
    """The tool stopped waiting for these keys without their answers (its own timeout
    around ``ctx.input``, say): they are no longer outstanding (SEP-2663 "superseded"), and
    an answer to them is ignored. Like ``InputsAccepted``, it never frees a key for reuse."""

    keys: frozenset[str]


@final
@dataclass(frozen=True, slots=True)
class Completed:
    result: Mapping[str, Any]


@final
@dataclass(frozen=True, slots=True)
class Failed:
    error: Mapping[str, Any]


@final
@dataclass(frozen=True, slots=True)
class CancelRequested:
    """A client's ``tasks/cancel`` (never anything else: see ``Expired`` and ``Stopped``)."""

    message: str = "Cancellation requested"


@final
@dataclass(frozen=True, slots=True)
class Expired:
    """The task's TTL ran out while it was still working: it fails, it was not cancelled."""

    message: str = "Task expired before it finished"


@final
@dataclass(frozen=True, slots=True)
class Stopped:
    """The server stopped (shutdown, or a lost worker) before the task finished."""

    message: str = "The server stopped before the task finished"


TaskEvent = (
    InputRequested
    | InputsAccepted
    | InputsWithdrawn
    | Completed
    | Failed
    | CancelRequested
    | Expired
    | Stopped
)


def apply(task: TaskRecord, event: TaskEvent, now_ms: int) -> TaskRecord:
    """The task after ``event``; the same object when the event changes nothing.

    A terminal task ignores every event. Asking again for a key already used raises
    ``KeyReused``; accepting (or withdrawing) keys that are not pending is a no-op for those
    keys.
    """
    if task.terminal:
        return task
    if isinstance(event, InputRequested):
        reused = task.used_keys & event.requests.keys()
        if reused:
            raise KeyReused(f"input key(s) already used in this task: {sorted(reused)}")
        if not event.requests:
            return task
        # the event's own requests when nothing else is pending (an event is never changed)
        pending = (
            {**task.input_requests, **event.requests} if task.input_requests else event.requests
        )
        return _move(
            task,
            Status.INPUT_REQUIRED,
            now_ms,
            input_requests=pending,
            used_keys=_shared(task.used_keys | frozenset(event.requests)),
        )
    if isinstance(event, InputsAccepted | InputsWithdrawn):  # answered, or no longer awaited
        matched = event.keys & task.input_requests.keys()
        if not matched:
            return task
        pending = {k: v for k, v in task.input_requests.items() if k not in matched}
        status = Status.INPUT_REQUIRED if pending else Status.WORKING
        return _move(task, status, now_ms, input_requests=pending)
    if isinstance(event, Completed):
        return _move(
            task,
            Status.COMPLETED,
            now_ms,
            result=event.result,
            input_requests={},
            status_message=None,
        )
    if isinstance(event, Failed):
        return _fail(task, event.error, now_ms)
    if isinstance(event, Expired | Stopped):
        return _fail(task, InternalError(event.message).to_error(), now_ms)
    return _move(task, Status.CANCELLED, now_ms, input_requests={}, status_message=event.message)


_SHARED_KEYS_MAX = 8  # the largest set of used keys tasks share


def _shared(keys: frozenset[str]) -> frozenset[str]:
    """One copy of each small set of used keys: a tool's tasks ask the same keys, and even a
    set of one key takes 216 bytes, held for as long as the task is. A larger set (a task
    that has asked many times) is its own: kept in the cache, every step of its growth would
    outlive the task."""
    return _shared_small(keys) if len(keys) <= _SHARED_KEYS_MAX else keys


@functools.lru_cache(maxsize=256)
def _shared_small(keys: frozenset[str]) -> frozenset[str]:
    return keys  # the first equal set made, from then on


def _fail(task: TaskRecord, error: Mapping[str, Any], now_ms: int) -> TaskRecord:
    message = str(error.get("message", "Task failed"))
    return _move(
        task, Status.FAILED, now_ms, error=error, input_requests={}, status_message=message
    )


def _move(task: TaskRecord, status: Status, now_ms: int, **changes: Any) -> TaskRecord:
    if status is not task.status and status not in TRANSITIONS[task.status]:
        raise InvalidTransition(f"no transition {task.status} -> {status}")
    # Every field read in one call (in order), the changes written over them by position,
    # and the generated __init__: 221 opcodes where dataclasses.replace, walking the fields
    # by name, spends 548 on every state change (two per task at least).
    values = list(_ALL_FIELDS(task))
    for name, value in changes.items():
        values[_POSITION[name]] = value
    values[_STATUS] = status
    values[_UPDATED] = max(now_ms, task.updated_ms)
    values[_REVISION] = task.revision + 1
    return TaskRecord(*values)


_POSITION = {f.name: i for i, f in enumerate(fields(TaskRecord))}
_ALL_FIELDS = operator.attrgetter(*_POSITION)
_STATUS, _UPDATED, _REVISION = _POSITION["status"], _POSITION["updated_ms"], _POSITION["revision"]
