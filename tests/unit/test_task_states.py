"""Unit tests for presa_trio.ext.tasks._states: the pure SEP-2663 task state machine."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.task_records import record

from presa_trio.errors import McpError
from presa_trio.ext.tasks._states import (
    TERMINAL,
    TRANSITIONS,
    CancelRequested,
    Completed,
    Expired,
    Failed,
    InputRequested,
    InputsAccepted,
    InputsWithdrawn,
    InvalidTransition,
    KeyReused,
    Status,
    Stopped,
    TaskEvent,
    TaskRecord,
    apply,
)

T0 = 1_700_000_000_000
ASK: dict[str, Any] = {"method": "elicitation/create", "params": {"message": "Region?"}}
RESULT: dict[str, Any] = {"content": [{"type": "text", "text": "done"}], "isError": False}
ERROR: dict[str, Any] = {"code": -32603, "message": "boom"}
PROPS = settings(max_examples=300, deadline=None, database=None)


def rec(**changes: Any) -> TaskRecord:
    return record(**changes)


def asking(*keys: str) -> InputRequested:
    return InputRequested({k: ASK for k in keys})


def waiting(*keys: str) -> TaskRecord:
    """A task parked on ``keys`` (revision 1)."""
    return apply(rec(), asking(*keys), T0 + 10)


EVERY_EVENT: list[TaskEvent] = [
    asking("a"),
    InputRequested({}),
    InputsAccepted(frozenset({"a"})),
    InputsWithdrawn(frozenset({"a"})),
    Completed(RESULT),
    Failed(ERROR),
    CancelRequested(),
    CancelRequested("stop"),
    Expired(),
    Stopped(),
]

# ------------------------------------------------------------------ the table


def test_status_values() -> None:
    assert [s.value for s in Status] == [
        "working",
        "input_required",
        "completed",
        "failed",
        "cancelled",
    ]


def test_terminal_set() -> None:
    assert frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED}) == TERMINAL


#: Which statuses each status may move to (SEP-2663 §Task Status): what the table must
#: allow, and nothing more.
MOVES: dict[Status, set[Status]] = {
    Status.WORKING: {
        Status.INPUT_REQUIRED,
        Status.COMPLETED,
        Status.FAILED,
        Status.CANCELLED,
    },
    Status.INPUT_REQUIRED: {
        Status.WORKING,
        Status.COMPLETED,
        Status.FAILED,
        Status.CANCELLED,
    },
    Status.COMPLETED: set(),
    Status.FAILED: set(),
    Status.CANCELLED: set(),
}
EVENT_TYPES = {type(event) for event in EVERY_EVENT}


def test_transition_table() -> None:
    """A status that is not terminal has a move for every event, a terminal one for none;
    and every move leads where ``MOVES`` allows."""
    assert {status: set(row) for status, row in TRANSITIONS.items()} == {
        Status.WORKING: EVENT_TYPES,
        Status.INPUT_REQUIRED: EVENT_TYPES,
        Status.COMPLETED: set(),
        Status.FAILED: set(),
        Status.CANCELLED: set(),
    }
    reached: dict[Status, set[Status]] = {status: set() for status in Status}
    for start in (rec(), waiting("a"), waiting("a", "b")):
        for event in [*EVERY_EVENT, asking("b", "c"), InputsAccepted(frozenset({"a", "b"}))]:
            try:
                after = apply(start, event, T0 + 20)
            except KeyReused:
                continue
            if after.status is not start.status:
                reached[start.status].add(after.status)
    assert reached == MOVES


@pytest.mark.parametrize("status", list(Status))
def test_terminal_property(status: Status) -> None:
    assert rec(status=status).terminal is (status in TERMINAL)


def test_record_is_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        rec().status = Status.FAILED  # type: ignore[misc]


# ------------------------------------------------------------- terminal is sticky


@pytest.mark.parametrize("status", sorted(TERMINAL))
@pytest.mark.parametrize("event", EVERY_EVENT, ids=repr)
def test_terminal_ignores_every_event(status: Status, event: TaskEvent) -> None:
    task = rec(status=status, revision=7, input_requests={}, used_keys=frozenset({"a"}))
    assert apply(task, event, T0 + 999) is task


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_terminal_ignores_reused_key_without_raising(status: Status) -> None:
    task = rec(status=status, used_keys=frozenset({"a"}))
    assert apply(task, asking("a"), T0) is task


# ------------------------------------------------------------------ each event


@pytest.mark.parametrize(
    ("event", "status"),
    [
        (asking("a"), Status.INPUT_REQUIRED),
        (Completed(RESULT), Status.COMPLETED),
        (Failed(ERROR), Status.FAILED),
        (CancelRequested(), Status.CANCELLED),
    ],
    ids=["input", "completed", "failed", "cancelled"],
)
def test_working_moves(event: TaskEvent, status: Status) -> None:
    before = rec(revision=3)
    after = apply(before, event, T0 + 5)
    assert after.status is status
    assert after.revision == 4
    assert after.updated_ms == T0 + 5
    assert (after.task_id, after.principal, after.tool, after.created_ms) == (
        "t-1",
        "s",
        "deploy",
        T0,
    )
    assert (after.ttl_ms, after.poll_interval_ms) == (60_000, 1_000)
    assert before.status is Status.WORKING and before.revision == 3


@pytest.mark.parametrize(
    "event",
    [
        asking("b"),
        InputsAccepted(frozenset({"a"})),
        Completed(RESULT),
        Failed(ERROR),
        CancelRequested(),
    ],
    ids=["more-input", "accepted", "completed", "failed", "cancelled"],
)
def test_updated_ms_never_goes_back(event: TaskEvent) -> None:
    task = rec(status=Status.INPUT_REQUIRED, input_requests={"a": ASK}, used_keys=frozenset("a"))
    task = replace(task, updated_ms=T0 + 500)
    after = apply(task, event, T0 + 100)
    assert after.updated_ms == T0 + 500
    assert after.revision == task.revision + 1


def test_input_requested_adds_and_marks_keys() -> None:
    after = apply(rec(), asking("a", "b"), T0 + 1)
    assert after.status is Status.INPUT_REQUIRED
    assert dict(after.input_requests) == {"a": ASK, "b": ASK}
    assert after.used_keys == {"a", "b"}
    assert after.revision == 1


def test_input_requested_while_waiting_accumulates() -> None:
    after = apply(waiting("a"), asking("b"), T0 + 20)
    assert after.status is Status.INPUT_REQUIRED
    assert dict(after.input_requests) == {"a": ASK, "b": ASK}
    assert after.used_keys == {"a", "b"}
    assert after.revision == 2


def test_used_keys_stays_a_frozenset() -> None:
    # TaskRecord.used_keys is declared frozenset[str] (immutable plain data); apply must not
    # turn it into a mutable set.
    after = apply(rec(), asking("a"), T0 + 1)
    assert type(after.used_keys) is frozenset


def test_a_first_round_given_its_keys_keeps_that_very_set() -> None:
    """Which tasks share a set of keys is the runner's choice (``TaskRunner.shared_keys``):
    the state machine keeps the set a round brings, and makes a set of its own otherwise."""
    keys = frozenset({"region", "size"})
    one = apply(rec(task_id="t-1"), InputRequested({"region": ASK, "size": ASK}, keys), T0 + 1)
    other = apply(rec(task_id="t-2"), InputRequested({"size": ASK, "region": ASK}, keys), T0 + 2)
    assert one.used_keys is other.used_keys is keys
    third = apply(rec(task_id="t-3"), asking("region", "size"), T0 + 3)
    assert third.used_keys == keys and third.used_keys is not keys
    later = apply(apply(one, InputsAccepted(keys), T0 + 4), asking("x"), T0 + 5)
    assert later.used_keys == frozenset({"region", "size", "x"})
    assert keys == frozenset({"region", "size"})  # the shared set is never changed


def test_an_event_the_table_has_no_move_for_is_refused() -> None:
    with pytest.raises(InvalidTransition, match="no move"):
        apply(rec(), object(), T0)  # type: ignore[arg-type]


def test_empty_input_request_is_a_no_op() -> None:
    task = rec()
    assert apply(task, InputRequested({}), T0 + 1) is task


def test_asking_for_a_pending_key_raises() -> None:
    task = waiting("a")
    with pytest.raises(KeyReused):
        apply(task, asking("a"), T0 + 20)
    assert dict(task.input_requests) == {"a": ASK}


def test_asking_for_an_answered_key_raises() -> None:
    answered = apply(waiting("a"), InputsAccepted(frozenset({"a"})), T0 + 20)
    assert answered.status is Status.WORKING
    with pytest.raises(KeyReused, match="'a'"):
        apply(answered, asking("a", "fresh"), T0 + 30)


def test_key_reused_is_a_value_error() -> None:
    assert issubclass(KeyReused, InvalidTransition) and issubclass(KeyReused, McpError)


def test_accepting_every_pending_key_returns_to_working() -> None:
    after = apply(waiting("a", "b"), InputsAccepted(frozenset({"a", "b"})), T0 + 20)
    assert after.status is Status.WORKING
    assert dict(after.input_requests) == {}
    assert after.used_keys == {"a", "b"}
    assert after.revision == 2
    assert after.updated_ms == T0 + 20


def test_accepting_some_keys_stays_input_required() -> None:
    before = waiting("a", "b")
    after = apply(before, InputsAccepted(frozenset({"a"})), T0 + 20)
    assert after.status is Status.INPUT_REQUIRED
    assert dict(after.input_requests) == {"b": ASK}
    assert after.revision == 2
    assert dict(before.input_requests) == {"a": ASK, "b": ASK}


def test_unknown_keys_are_ignored_next_to_known_ones() -> None:
    after = apply(waiting("a"), InputsAccepted(frozenset({"a", "zzz"})), T0 + 20)
    assert after.status is Status.WORKING
    assert dict(after.input_requests) == {}
    assert after.revision == 2


@pytest.mark.parametrize("task", [waiting("a"), rec()], ids=["waiting", "working"])
def test_accepting_only_unknown_keys_is_a_no_op(task: TaskRecord) -> None:
    assert apply(task, InputsAccepted(frozenset({"zzz"})), T0 + 20) is task
    assert apply(task, InputsAccepted(frozenset()), T0 + 20) is task


@pytest.mark.parametrize(
    "start", [rec(status_message="step 2"), waiting("a")], ids=["working", "waiting"]
)
def test_completed_stores_result_and_clears(start: TaskRecord) -> None:
    after = apply(start, Completed(RESULT), T0 + 50)
    assert after.status is Status.COMPLETED
    assert after.result == RESULT
    assert dict(after.input_requests) == {}
    assert after.status_message is None
    assert after.error is None


def test_a_measured_result_keeps_its_size_which_is_not_compared() -> None:
    """``Completed.size`` (the runner's measure of the result) becomes the record's
    ``result_bytes``, which later moves keep and equality ignores."""
    measured = apply(rec(), Completed(RESULT, 61), T0 + 50)
    assert measured.result_bytes == 61
    assert apply(rec(), Completed(RESULT), T0 + 50).result_bytes is None
    assert measured == apply(rec(), Completed(RESULT), T0 + 50)  # not compared
    assert apply(waiting("a"), Completed(RESULT, 61), T0 + 50).result_bytes == 61
    assert apply(measured, CancelRequested(), T0 + 60) is measured  # terminal: as it was
    assert "result_bytes" not in repr(measured)


@pytest.mark.parametrize("start", [rec(), waiting("a")], ids=["working", "waiting"])
def test_failed_stores_error_and_message(start: TaskRecord) -> None:
    after = apply(start, Failed(ERROR), T0 + 50)
    assert after.status is Status.FAILED
    assert after.error == ERROR
    assert after.status_message == "boom"
    assert dict(after.input_requests) == {}
    assert after.result is None


@pytest.mark.parametrize("start", [rec(), waiting("a")], ids=["working", "waiting"])
def test_cancelled_default_message_and_clears_inputs(start: TaskRecord) -> None:
    after = apply(start, CancelRequested(), T0 + 50)
    assert after.status is Status.CANCELLED
    assert after.status_message == "Cancellation requested"
    assert dict(after.input_requests) == {}
    assert after.result is None and after.error is None


def test_withdrawn_keys_stop_being_outstanding_and_stay_used() -> None:
    """A round the tool stopped waiting for (SEP-2663 "superseded"): its keys leave the
    record, the task works on, and asking them again is still a reuse."""
    before = waiting("a", "b")
    some = apply(before, InputsWithdrawn(frozenset({"a", "zzz"})), T0 + 20)
    assert (some.status, dict(some.input_requests)) == (Status.INPUT_REQUIRED, {"b": ASK})
    every = apply(some, InputsWithdrawn(frozenset({"b"})), T0 + 30)
    assert (every.status, dict(every.input_requests)) == (Status.WORKING, {})
    assert every.used_keys == {"a", "b"} and every.revision == 3
    assert apply(every, InputsWithdrawn(frozenset({"a"})), T0 + 40) is every  # nothing pending
    with pytest.raises(KeyReused):
        apply(every, asking("a"), T0 + 50)


def test_cancelled_custom_message() -> None:
    assert apply(rec(), CancelRequested("user hit stop"), T0).status_message == "user hit stop"


def test_late_result_cannot_resurrect_cancelled() -> None:
    cancelled = apply(waiting("a"), CancelRequested(), T0 + 50)
    for event in (Completed(RESULT), Failed(ERROR), InputsAccepted(frozenset({"a"}))):
        assert apply(cancelled, event, T0 + 60) is cancelled
    assert cancelled.revision == 2


# ---------------------------------------------------------------------- expiry


@pytest.mark.parametrize(
    ("ttl_ms", "now_ms", "expired"),
    [
        (500, T0, False),
        (500, T0 + 499, False),
        (500, T0 + 500, True),
        (500, T0 + 501, True),
        (0, T0, True),
        (None, T0, False),
        (None, T0 + 10**15, False),
    ],
)
def test_expired(ttl_ms: int | None, now_ms: int, expired: bool) -> None:
    assert rec(ttl_ms=ttl_ms).expired(now_ms) is expired


def test_expiry_counts_from_creation_not_update() -> None:
    task = rec(ttl_ms=500, updated_ms=T0 + 10_000)
    assert task.expired(T0 + 500) is True


# ---------------------------------------------------------- property: random runs

KEYS = st.sampled_from("abcd")
events: st.SearchStrategy[TaskEvent] = st.one_of(
    st.dictionaries(KEYS, st.just(ASK), max_size=3).map(InputRequested),
    st.frozensets(st.sampled_from("abcdx"), max_size=3).map(InputsAccepted),
    st.frozensets(st.sampled_from("abcdx"), max_size=3).map(InputsWithdrawn),
    st.just(Completed(RESULT)),
    st.just(Failed(ERROR)),
    st.builds(CancelRequested, st.sampled_from(["Cancellation requested", "stop"])),
    st.just(Expired()),
    st.just(Stopped()),
)


@PROPS
@given(st.lists(st.tuples(events, st.integers(0, 10_000)), max_size=25))
def test_random_event_sequences_keep_invariants(steps: list[tuple[TaskEvent, int]]) -> None:
    task = rec()
    changes = 0
    frozen: TaskRecord | None = None
    for event, now in steps:
        before = task
        try:
            task = apply(before, event, T0 + now)
        except KeyReused:
            assert isinstance(event, InputRequested)
            assert not before.terminal
            assert before.used_keys & event.requests.keys()
            continue
        # (a) once terminal, the very same object forever
        if frozen is not None:
            assert task is frozen
        if task.terminal and frozen is None:
            frozen = task
        # (b) one of the five statuses
        assert task.status in set(Status)
        if task is not before:
            changes += 1
            assert task.updated_ms == max(T0 + now, before.updated_ms)
            # (f) the move taken is allowed (a re-ask / partial accept stays input_required)
            if task.status is before.status:
                assert task.status is Status.INPUT_REQUIRED
            else:
                assert task.status in MOVES[before.status]
        # (c) revision counts exactly the effective changes
        assert task.revision == changes
        # (d) pending keys were all marked used
        assert set(task.input_requests) <= set(task.used_keys)
        assert set(before.used_keys) <= set(task.used_keys)
        # (e) input_required iff something is pending (while not terminal)
        if not task.terminal:
            assert (task.status is Status.INPUT_REQUIRED) == bool(task.input_requests)
        else:
            assert dict(task.input_requests) == {}


@PROPS
@given(st.lists(events, max_size=25))
def test_random_sequences_match_a_simple_model(seq: list[TaskEvent]) -> None:
    task = rec()
    status, pending, used = Status.WORKING, set[str](), set[str]()
    for event in seq:
        if status in TERMINAL:
            assert apply(task, event, T0) is task
            continue
        if isinstance(event, InputRequested):
            if used & set(event.requests):
                with pytest.raises(KeyReused):
                    apply(task, event, T0)
                continue
            pending |= set(event.requests)
            used |= set(event.requests)
            status = Status.INPUT_REQUIRED if pending else status
        elif isinstance(event, InputsAccepted | InputsWithdrawn):
            pending -= event.keys
            status = Status.INPUT_REQUIRED if pending else Status.WORKING
        elif isinstance(event, Completed):
            status, pending = Status.COMPLETED, set()
        elif isinstance(event, Failed | Expired | Stopped):
            status, pending = Status.FAILED, set()
        else:
            status, pending = Status.CANCELLED, set()
        task = apply(task, event, T0)
        assert (task.status, set(task.input_requests), set(task.used_keys)) == (
            status,
            pending,
            used,
        )


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (Expired(), "Task expired before it finished"),
        (Stopped(), "The server stopped before the task finished"),
    ],
)
@pytest.mark.parametrize("start", [Status.WORKING, Status.INPUT_REQUIRED])
def test_expiry_and_stopping_fail_the_task_they_never_cancel_it(
    event: TaskEvent, message: str, start: Status
) -> None:
    before = rec(status=start, input_requests={"a": ASK} if start is Status.INPUT_REQUIRED else {})
    after = apply(before, event, T0 + 1)
    assert after.status is Status.FAILED
    assert after.error == {"code": -32603, "message": message}
    assert after.status_message == message and after.input_requests == {}


@pytest.mark.parametrize("event", [Expired(), Stopped()])
@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_expiry_and_stopping_leave_a_finished_task_alone(event: TaskEvent, status: Status) -> None:
    done = rec(status=status)
    assert apply(done, event, T0 + 1) is done
