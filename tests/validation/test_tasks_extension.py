"""The Tasks extension (SEP-2663) against presa_trio's schema of it (schema/README.md): what
presa_trio's own Tasks traffic looks like passes, and the failures the official conformance
runner's task checks look for (tasks-lifecycle, tasks-wire-fields,
tasks-dispatch-and-envelope) are findings, each at its leaf. Test data written here, from the
checks' descriptions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.task_records import record

from presa_trio.ext.tasks import _wire as wire
from presa_trio.ext.tasks._states import Status
from presa_trio.validation import check_capture

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
}
WHEN = "2026-11-03T18:04:05.123Z"
BASE = {"taskId": "t-1", "createdAt": WHEN, "lastUpdatedAt": WHEN, "ttlMs": 3600000,
        "pollIntervalMs": 100}  # fmt: skip
DONE = {"resultType": "complete", "content": [{"type": "text", "text": "Completed a"}]}


def exchange(method: str, params: dict[str, Any], result: dict[str, Any]) -> list[str]:
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    return [json.dumps(request), json.dumps({"jsonrpc": "2.0", "id": 1, "result": result})]


def findings(method: str, params: dict[str, Any], result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f.rule, f.pointer) for f in check_capture(exchange(method, params, result))]


CALL = ("tools/call", {"name": "slow_compute", "arguments": {"seconds": 2}})
GET = ("tasks/get", {"taskId": "t-1"})
CANCEL = ("tasks/cancel", {"taskId": "t-1"})
UPDATE = ("tasks/update", {"taskId": "t-1", "inputResponses": {}})


ELICIT = {"method": "elicitation/create", "params": {"message": "Delete f?", "requestedSchema": {
    "type": "object", "properties": {"confirm": {"type": "boolean"}}}}}  # fmt: skip


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"status": Status.INPUT_REQUIRED, "input_requests": {"confirm-delete": ELICIT}},
        {"status": Status.COMPLETED, "result": DONE, "status_message": "done"},
        {"status": Status.FAILED, "error": {"code": -32603, "message": "Tool raised"}},
        {"status": Status.CANCELLED, "ttl_ms": None, "poll_interval_ms": None},
    ],
)
def test_presa_trio_task_wire_shapes_pass(changes: dict[str, Any]) -> None:
    """presa_trio's own projections (presa_trio.ext.tasks._wire) of each status: the
    creation result, the tasks/get result, the notification; and the acknowledgements."""
    task = record(**changes)
    if task.status is Status.WORKING:
        assert findings(*CALL, wire.creation(task)) == []
    assert findings(*GET, wire.detailed(task)) == []
    note = {"jsonrpc": "2.0", "method": "notifications/tasks", "params": wire.notification(task)}
    assert [str(f) for f in check_capture([*exchange(*GET, wire.detailed(task)),
                                           json.dumps(note)])] == []  # fmt: skip
    assert findings(*CANCEL, {"resultType": "complete"}) == []


@pytest.mark.parametrize(
    "result",
    [
        # tasks-wire-field-renames: ttlMs null (no limit) and no pollIntervalMs are both fine
        {"resultType": "task", **BASE, "status": "working", "ttlMs": None},
        {"resultType": "task", **{k: v for k, v in BASE.items() if k != "pollIntervalMs"},
         "status": "working"},
    ],
)  # fmt: skip
def test_the_runners_accepted_task_shapes_pass(result: dict[str, Any]) -> None:
    assert findings(*CALL, result) == []


@pytest.mark.parametrize(
    ("case", "sent", "result", "expected"),
    [
        # sep-2663-result-type-task-on-create: a flat Result & Task, no nested wrapper
        ("task wrapper", CALL, {"resultType": "task", "task": {**BASE, "status": "working"}},
         [("schema", "/result")]),
        # status must be one of the five
        ("bogus status", CALL, {"resultType": "task", **BASE, "status": "running"},
         [("schema", "/result/status")]),
        # tasks-wire-field-renames: ttlMs present (null or an integer), no ttl/pollInterval
        ("v1 ttl", CALL, {"resultType": "task", "taskId": "t", "status": "working",
                          "createdAt": WHEN, "lastUpdatedAt": WHEN, "ttl": 60000},
         [("schema", "/result")]),
        ("fractional poll", CALL, {"resultType": "task", **BASE, "status": "working",
                                   "pollIntervalMs": 2.5},
         [("schema", "/result/pollIntervalMs")]),
        ("ttl as text", CALL, {"resultType": "task", **BASE, "status": "working", "ttlMs": "1h"},
         [("schema", "/result/ttlMs")]),
        # sep-2663-tasks-get-status-completed: the result inlined
        ("completed without result", GET, {"resultType": "complete", **BASE,
                                           "status": "completed"},
         [("schema", "/result")]),
        # sep-2663-tasks-get-status-failed: a numeric error code, a string message
        ("failed with a text code", GET, {"resultType": "complete", **BASE, "status": "failed",
                                          "error": {"code": "boom", "message": "x"}},
         [("schema", "/result/error/code")]),
        ("input_required without requests", GET, {"resultType": "complete", **BASE,
                                                  "status": "input_required"},
         [("schema", "/result")]),
        # tasks-result-type-complete-on-non-task-responses
        ("get answered as a task", GET, {"resultType": "task", **BASE, "status": "working"},
         [("result-type", "/result/resultType")]),
        ("cancel ack without resultType", CANCEL, {}, [("schema", "/result")]),
        ("cancel ack typed as a task", CANCEL, {"resultType": "task"},
         [("result-type", "/result/resultType"), ("schema", "/result")]),
        ("update ack typed as a task", UPDATE, {"resultType": "task"},
         [("result-type", "/result/resultType"), ("schema", "/result")]),
        # sep-2663-tasks-get-status-failed: the error inlined
        ("failed without error", GET, {"resultType": "complete", **BASE, "status": "failed"},
         [("schema", "/result")]),
        # tasks/update carries inputResponses, each an answer to an input request; the
        # runner's own probe {"unknown-key": {"ignored": true}} (tasks-result-type-complete-on-
        # non-task-responses) is no such answer, and the official zod validators refuse it too
        ("update without inputResponses", ("tasks/update", {"taskId": "t-1"}),
         {"resultType": "complete"}, [("schema", "/params")]),
        ("the runner's update probe", ("tasks/update", {"taskId": "t-1", "inputResponses": {
            "unknown-key": {"ignored": True}}}), {"resultType": "complete"},
         [("schema", "/params/inputResponses/unknown-key")]),
    ],
)  # fmt: skip
def test_the_runners_task_failures_are_findings(
    case: str,
    sent: tuple[str, dict[str, Any]],
    result: dict[str, Any],
    expected: list[tuple[str, str]],
) -> None:
    assert findings(*sent, result)[: len(expected)] == expected, case
    assert {rule for rule, _ in findings(*sent, result)} <= {"schema", "result-type"}
