"""Unit tests for presa_trio.ext.tasks._wire: the exact SEP-2663 wire shapes of a task."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.task_records import record

from presa_trio.ext.tasks._states import Status, TaskRecord
from presa_trio.ext.tasks._wire import EXTENSION_ID, creation, detailed, iso, notification

T0 = 1_700_000_000_123
STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ASK: dict[str, Any] = {"method": "elicitation/create", "params": {"message": "Region?"}}
RESULT: dict[str, Any] = {"content": [{"type": "text", "text": "done"}], "isError": False}
ERROR: dict[str, Any] = {"code": -32603, "message": "boom"}
FORBIDDEN_IN_CREATION = {
    "result",
    "error",
    "inputRequests",
    "requestState",
    "ttl",
    "pollInterval",
    "task",
}


def rec(**changes: Any) -> TaskRecord:
    return record(created_ms=T0, **{"updated_ms": T0 + 1_000, "poll_interval_ms": 2_000, **changes})


def full(status: Status) -> TaskRecord:
    """A record with every optional field filled, whatever its status."""
    return rec(
        status=status,
        status_message="msg",
        input_requests={"a": ASK},
        used_keys=frozenset({"a"}),
        result=RESULT,
        error=ERROR,
        revision=3,
    )


BASE: dict[str, Any] = {
    "taskId": "t-1",
    "status": "working",
    "createdAt": "2023-11-14T22:13:20.123Z",
    "lastUpdatedAt": "2023-11-14T22:13:21.123Z",
    "ttlMs": 60_000,
    "pollIntervalMs": 2_000,
}

# ------------------------------------------------------------------------ iso


def test_extension_id() -> None:
    assert EXTENSION_ID == "io.modelcontextprotocol/tasks"


@pytest.mark.parametrize(
    ("ms", "stamp"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (5, "1970-01-01T00:00:00.005Z"),
        (999, "1970-01-01T00:00:00.999Z"),
        (1_000, "1970-01-01T00:00:01.000Z"),
        (1_700_000_000_123, "2023-11-14T22:13:20.123Z"),
        (1_700_000_000_000, "2023-11-14T22:13:20.000Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
    ],
)
def test_iso(ms: int, stamp: str) -> None:
    assert iso(ms) == stamp
    assert STAMP.match(iso(ms))


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(0, 253_402_300_799_999))
def test_iso_shape_and_round_trip(ms: int) -> None:
    stamp = iso(ms)
    assert STAMP.match(stamp)
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert parsed == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


# ------------------------------------------------------------------- creation


def test_creation_exact() -> None:
    assert creation(rec()) == {"resultType": "task", **BASE}


def test_creation_with_status_message() -> None:
    assert creation(rec(status_message="starting")) == {
        "resultType": "task",
        **BASE,
        "statusMessage": "starting",
    }


def test_creation_null_ttl_is_present_and_poll_interval_absent() -> None:
    wire = creation(rec(ttl_ms=None, poll_interval_ms=None))
    assert wire == {
        "resultType": "task",
        "taskId": "t-1",
        "status": "working",
        "createdAt": "2023-11-14T22:13:20.123Z",
        "lastUpdatedAt": "2023-11-14T22:13:21.123Z",
        "ttlMs": None,
    }
    assert "ttlMs" in wire
    assert "pollIntervalMs" not in wire


@pytest.mark.parametrize("status", list(Status))
def test_creation_never_carries_a_payload(status: Status) -> None:
    wire = creation(full(status))
    assert wire == {
        "resultType": "task",
        **BASE,
        "status": status.value,
        "statusMessage": "msg",
    }
    assert not FORBIDDEN_IN_CREATION & wire.keys()


# ------------------------------------------------------------------- detailed


@pytest.mark.parametrize(
    ("status", "payload"),
    [
        (Status.WORKING, {}),
        (Status.INPUT_REQUIRED, {"inputRequests": {"a": ASK}}),
        (Status.COMPLETED, {"result": RESULT}),
        (Status.FAILED, {"error": ERROR}),
        (Status.CANCELLED, {}),
    ],
)
def test_detailed_exact_per_status(status: Status, payload: dict[str, Any]) -> None:
    expected = {
        "resultType": "complete",
        **BASE,
        "status": status.value,
        "statusMessage": "msg",
        **payload,
    }
    assert detailed(full(status)) == expected
    assert notification(full(status)) == {k: v for k, v in expected.items() if k != "resultType"}


@pytest.mark.parametrize("status", list(Status))
def test_notification_is_detailed_without_result_type(status: Status) -> None:
    task = full(status)
    wire = detailed(task)
    assert wire.pop("resultType") == "complete"
    assert notification(task) == wire
    assert "resultType" not in notification(task)


def test_detailed_input_required_shows_only_pending_requests() -> None:
    task = rec(
        status=Status.INPUT_REQUIRED,
        input_requests={"b": ASK},
        used_keys=frozenset({"a", "b"}),
    )
    assert detailed(task)["inputRequests"] == {"b": ASK}


def test_detailed_without_message_or_optional_fields() -> None:
    task = rec(status=Status.COMPLETED, result=RESULT, ttl_ms=None, poll_interval_ms=None)
    assert detailed(task) == {
        "resultType": "complete",
        "taskId": "t-1",
        "status": "completed",
        "createdAt": "2023-11-14T22:13:20.123Z",
        "lastUpdatedAt": "2023-11-14T22:13:21.123Z",
        "ttlMs": None,
        "result": RESULT,
    }


@pytest.mark.parametrize("project", [creation, detailed, notification])
@pytest.mark.parametrize("status", list(Status))
def test_projections_are_camel_case_json(project: Any, status: Status) -> None:
    wire = project(full(status))
    assert all("_" not in key for key in wire)
    assert json.loads(json.dumps(wire)) == wire
    assert type(wire["status"]) is str
    assert STAMP.match(wire["createdAt"]) and STAMP.match(wire["lastUpdatedAt"])


def test_projections_do_not_alias_the_record() -> None:
    task = full(Status.COMPLETED)
    detailed(task)["result"]["isError"] = True
    waiting = full(Status.INPUT_REQUIRED)
    notification(waiting)["inputRequests"]["zzz"] = ASK
    assert task.result == RESULT
    assert dict(waiting.input_requests) == {"a": ASK}
