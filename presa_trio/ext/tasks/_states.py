"""The task state machine (SEP-2663): statuses, events and one pure ``apply``.

A ``TaskRecord`` is plain, immutable data (no trio objects), so any store can keep it. The
transition table is data a reader can audit; terminal states are sticky, so a late result
can never resurrect a cancelled task. Input keys are unique for a task's whole life. How a
task ended is an event of its own (cancelled by a client, expired, stopped with the server),
even where two of them land in the same wire status.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

from ...errors import InternalError


class Status(enum.StrEnum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})


class InvalidTransition(InternalError):
    """An event the table has no move for: a bug in the caller, answered -32603."""


class KeyReused(InvalidTransition):
    """An input key was asked for twice in one task's life."""


@final
@dataclass(frozen=True, slots=True)
class TaskRecord:
    """Everything stored about one task. Times are integer milliseconds since the epoch.

    ``principal`` is who the task belongs to: another principal's task is invisible.
    ``owner`` is the worker running it (its backend's ``worker_id``): where a cancel or an
    answer for it must go, and whose loss fails it. ``result_bytes`` is the size of
    ``result`` as JSON when the runner measured it already (its check of a result does), so
    a store that counts bytes need not write the result again to know it; None: unknown. It
    is not compared, and not stored (a record read back has None).
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
    result_bytes: int | None = field(default=None, compare=False, repr=False)

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
    """A round of questions. ``keys``, when given, is the set of the requests' keys: a
    runner passes one set that its tasks asking the same keys share (a task holds it for
    its whole life). None: a set of its own."""

    requests: Mapping[str, Mapping[str, Any]]
    keys: frozenset[str] | None = None


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
    """The work's result; ``size``, its bytes as JSON when whoever made the event measured
    them (the record's ``result_bytes``)."""

    result: Mapping[str, Any]
    size: int | None = None


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
    """The task after ``event`` (``TRANSITIONS``); the same object when it changes nothing.

    A terminal task ignores every event. Asking again for a key already used raises
    ``KeyReused``; accepting (or withdrawing) keys that are not pending is a no-op for those
    keys.
    """
    moves = TRANSITIONS[task.status]
    if not moves:  # terminal: sticky
        return task
    move = moves.get(type(event))
    if move is None:
        raise InvalidTransition(f"no move from {task.status} on {type(event).__name__}")
    return move(task, event, now_ms)


# ---------------------------------------------------------------------- moves
# Each takes the task, the event and the time, and returns the next record (or the same
# one when nothing changes). Only ``TRANSITIONS`` calls them, with the event type its row
# names.


def _ask(task: TaskRecord, asked: InputRequested, now_ms: int) -> TaskRecord:
    """The keys asked join what is pending, and are used for good."""
    reused = task.used_keys & asked.requests.keys()
    if reused:
        raise KeyReused(f"input key(s) already used in this task: {sorted(reused)}")
    if not asked.requests:
        return task
    # the event's own requests and keys when nothing else is (an event is never changed)
    pending = {**task.input_requests, **asked.requests} if task.input_requests else asked.requests
    keys = asked.keys if asked.keys is not None else frozenset(asked.requests)
    return _next(
        task,
        now_ms,
        Status.INPUT_REQUIRED,
        status_message=task.status_message,
        input_requests=pending,
        used_keys=task.used_keys | keys if task.used_keys else keys,
    )


def _settle_keys(
    task: TaskRecord, settled: InputsAccepted | InputsWithdrawn, now_ms: int
) -> TaskRecord:
    """Answered or withdrawn, the keys stop being pending (they stay used); with none left
    the task works again."""
    matched = settled.keys & task.input_requests.keys()
    if not matched:
        return task
    pending = {k: v for k, v in task.input_requests.items() if k not in matched}
    return _next(
        task,
        now_ms,
        Status.INPUT_REQUIRED if pending else Status.WORKING,
        status_message=task.status_message,
        input_requests=pending,
    )


def _complete(task: TaskRecord, completed: Completed, now_ms: int) -> TaskRecord:
    return _next(
        task,
        now_ms,
        Status.COMPLETED,
        status_message=None,
        input_requests={},
        result=completed.result,
        result_bytes=completed.size,
    )


def _fail(task: TaskRecord, failed: Failed, now_ms: int) -> TaskRecord:
    """The event's error is the task's, its message the status message."""
    return _failed_with(task, failed.error, now_ms)


def _fail_for_reason(task: TaskRecord, reason: Expired | Stopped, now_ms: int) -> TaskRecord:
    """Failed with -32603 and the event's message."""
    return _failed_with(task, InternalError(reason.message).to_error(), now_ms)


def _cancel(task: TaskRecord, cancel: CancelRequested, now_ms: int) -> TaskRecord:
    return _next(task, now_ms, Status.CANCELLED, status_message=cancel.message, input_requests={})


def _failed_with(task: TaskRecord, error: Mapping[str, Any], now_ms: int) -> TaskRecord:
    message = str(error.get("message", "Task failed"))
    return _next(
        task, now_ms, Status.FAILED, status_message=message, input_requests={}, error=error
    )


def _next(
    task: TaskRecord,
    now_ms: int,
    status: Status,
    *,
    status_message: str | None,
    input_requests: Mapping[str, Mapping[str, Any]],
    used_keys: frozenset[str] | None = None,
    result: Mapping[str, Any] | None = None,
    result_bytes: int | None = None,
    error: Mapping[str, Any] | None = None,
) -> TaskRecord:
    """The record after a move: one revision on, never updated before it was. Every field
    is named; what a move does not change (``used_keys``, ``result``, ``error`` unless
    given) is the task's."""
    return TaskRecord(
        task_id=task.task_id,
        principal=task.principal,
        tool=task.tool,
        status=status,
        created_ms=task.created_ms,
        updated_ms=max(now_ms, task.updated_ms),
        ttl_ms=task.ttl_ms,
        poll_interval_ms=task.poll_interval_ms,
        status_message=status_message,
        input_requests=input_requests,
        used_keys=task.used_keys if used_keys is None else used_keys,
        result=task.result if result is None else result,
        error=task.error if error is None else error,
        revision=task.revision + 1,
        owner=task.owner,
        result_bytes=task.result_bytes if result is None else result_bytes,
    )


Move = Callable[[TaskRecord, Any, int], TaskRecord]

#: How a task in each status moves on each event (SEP-2663 §Task Status). A status whose
#: row is empty is terminal, and sticky: every event leaves it as it is, so a late result
#: never resurrects a cancelled task. Where each move leads:
#:
#: - ``InputRequested``: input_required (an empty request changes nothing);
#: - ``InputsAccepted``, ``InputsWithdrawn``: working once nothing is pending, else
#:   input_required (keys that are not pending change nothing);
#: - ``Completed``: completed; ``CancelRequested``: cancelled;
#: - ``Failed``, ``Expired``, ``Stopped``: failed.
TRANSITIONS: Mapping[Status, Mapping[type[TaskEvent], Move]] = {
    Status.WORKING: {
        InputRequested: _ask,
        InputsAccepted: _settle_keys,
        InputsWithdrawn: _settle_keys,
        Completed: _complete,
        Failed: _fail,
        Expired: _fail_for_reason,
        Stopped: _fail_for_reason,
        CancelRequested: _cancel,
    },
    Status.INPUT_REQUIRED: {
        InputRequested: _ask,
        InputsAccepted: _settle_keys,
        InputsWithdrawn: _settle_keys,
        Completed: _complete,
        Failed: _fail,
        Expired: _fail_for_reason,
        Stopped: _fail_for_reason,
        CancelRequested: _cancel,
    },
    Status.COMPLETED: {},
    Status.FAILED: {},
    Status.CANCELLED: {},
}
