"""presa_trio's Tasks-extension schema (written from SEP-2663) against the extension's official
validators: the zod schemas of the npm package ``@modelcontextprotocol/ext-tasks`` (core/v2),
run by Node on the same corpus. Every message gets the same verdict from both, except the
differences listed in ``DIFFERENCES`` (also in schema/README.md), each asserted as it is.

The package is installed on first use into the clients' cache (tests/support/client_installs.py,
exact pins, Node found or installed as for the TypeScript SDK), so the test runs offline after
that."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import client_installs
from support.servers import SUPPORT

from presa_trio._protocol.schema import Schemas, load_extension

#: Our ``$def`` -> the package's export checking the same message.
ZOD = {
    "TaskStatus": "TaskStatusV2Schema",
    "Task": "TaskV2Schema",
    "DetailedTask": "DetailedTaskV2Schema",
    "CreateTaskResult": "CreateTaskResultV2Schema",
    "GetTaskRequest": "GetTaskRequestV2Schema",
    "GetTaskResult": "GetTaskResultV2Schema",
    "UpdateTaskRequest": "UpdateTaskRequestV2Schema",
    "UpdateTaskResult": "UpdateTaskResultV2Schema",
    "CancelTaskRequest": "CancelTaskRequestV2Schema",
    "CancelTaskResult": "CancelTaskResultV2Schema",
    "TaskStatusNotification": "TaskStatusNotificationV2Schema",
}

WHEN = "2026-11-03T18:04:05.123Z"
TASK = {"taskId": "t-1", "status": "working", "createdAt": WHEN, "lastUpdatedAt": WHEN,
        "ttlMs": 3600000, "pollIntervalMs": 100}  # fmt: skip
ELICIT = {"method": "elicitation/create", "params": {"message": "Delete f?", "requestedSchema": {
    "type": "object", "properties": {"confirm": {"type": "boolean"}}}}}  # fmt: skip
SAMPLE = {"method": "sampling/createMessage", "params": {"maxTokens": 10, "messages": [
    {"role": "user", "content": {"type": "text", "text": "hi"}}]}}  # fmt: skip
CALL_RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
ERROR = {"code": -32603, "message": "Tool raised"}


def task(**changes: Any) -> dict[str, Any]:
    found = {**TASK, **changes}
    return {k: v for k, v in found.items() if v is not Ellipsis}


DETAILED = {
    "working": task(),
    "input_required": task(
        status="input_required", inputRequests={"confirm": ELICIT, "sample": SAMPLE}
    ),
    "completed": task(status="completed", result=CALL_RESULT, statusMessage="done"),
    "failed": task(status="failed", error=ERROR),
    "cancelled": task(status="cancelled", ttlMs=None, pollIntervalMs=...),
}


def request(method: str, params: object, **envelope: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params, **envelope}


def note(params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/tasks", "params": params}


ACCEPT = {"action": "accept", "content": {"confirm": True}}

#: (case, $def, message, the verdict both give)
AGREED: list[tuple[str, str, object, bool]] = [
    *[(f"status {s}", "TaskStatus", s, True) for s in DETAILED],
    ("status bogus", "TaskStatus", "bogus", False),
    *[(f"create {s}", "CreateTaskResult", {"resultType": "task", **t}, True)
      for s, t in DETAILED.items()],
    ("create with _meta", "CreateTaskResult",
     {"resultType": "task", **task(), "_meta": {"io.modelcontextprotocol/serverInfo":
                                                {"name": "s", "version": "1"}}}, True),
    ("create with extra fields", "CreateTaskResult",
     {"resultType": "task", **task(), "vendorHint": {"x": 1}}, True),
    ("create taskId 17", "CreateTaskResult", {"resultType": "task", **task(taskId=17)}, False),
    ("create status bogus", "CreateTaskResult",
     {"resultType": "task", **task(status="bogus")}, False),
    ("create without taskId", "CreateTaskResult", {"resultType": "task", **task(taskId=...)},
     False),
    ("create without createdAt", "CreateTaskResult",
     {"resultType": "task", **task(createdAt=...)}, False),
    ("create without lastUpdatedAt", "CreateTaskResult",
     {"resultType": "task", **task(lastUpdatedAt=...)}, False),
    ("create without ttlMs (null must be said)", "CreateTaskResult",
     {"resultType": "task", **task(ttlMs=...)}, False),
    ("create ttlMs text", "CreateTaskResult", {"resultType": "task", **task(ttlMs="1h")}, False),
    ("create ttlMs fractional", "CreateTaskResult",
     {"resultType": "task", **task(ttlMs=1.5)}, False),
    ("create pollIntervalMs fractional", "CreateTaskResult",
     {"resultType": "task", **task(pollIntervalMs=2.5)}, False),
    ("create pollIntervalMs null", "CreateTaskResult",
     {"resultType": "task", **task(pollIntervalMs=None)}, False),
    ("create statusMessage number", "CreateTaskResult",
     {"resultType": "task", **task(statusMessage=3)}, False),
    ("create resultType complete", "CreateTaskResult", {"resultType": "complete", **task()},
     False),
    ("create without resultType", "CreateTaskResult", task(), False),
    ("create as a v1 task wrapper", "CreateTaskResult", {"resultType": "task", "task": task()},
     False),
    ("create with v1 ttl, no ttlMs", "CreateTaskResult",
     {"resultType": "task", **task(ttlMs=...), "ttl": 60000}, False),
    *[(f"get {s}", "GetTaskResult", {"resultType": "complete", **t}, True)
      for s, t in DETAILED.items()],
    ("get as a task", "GetTaskResult", {"resultType": "task", **task()}, False),
    ("get without resultType", "GetTaskResult", task(), False),
    ("get completed without result", "GetTaskResult",
     {"resultType": "complete", **task(status="completed")}, False),
    ("get completed, result not an object", "GetTaskResult",
     {"resultType": "complete", **task(status="completed", result=[1])}, False),
    ("get failed without error", "GetTaskResult",
     {"resultType": "complete", **task(status="failed")}, False),
    ("get failed, error code text", "GetTaskResult",
     {"resultType": "complete", **task(status="failed", error={"code": "boom",
                                                              "message": "x"})}, False),
    ("get failed, error without message", "GetTaskResult",
     {"resultType": "complete", **task(status="failed", error={"code": 1})}, False),
    ("get input_required without requests", "GetTaskResult",
     {"resultType": "complete", **task(status="input_required")}, False),
    ("get input_required, a request of no known method", "GetTaskResult",
     {"resultType": "complete", **task(status="input_required",
                                       inputRequests={"k": {"method": "ping"}})}, False),
    ("get input_required, elicitation without message", "GetTaskResult",
     {"resultType": "complete", **task(status="input_required", inputRequests={"k": {
         "method": "elicitation/create", "params": {"requestedSchema": {"type": "object"}}}})},
     False),
    ("get input_required, roots/list", "GetTaskResult",
     {"resultType": "complete", **task(status="input_required",
                                       inputRequests={"r": {"method": "roots/list"}})}, True),
    ("get status bogus", "GetTaskResult", {"resultType": "complete", **task(status="bogus")},
     False),
    *[(f"detailed {s}", "DetailedTask", t, True) for s, t in DETAILED.items()],
    ("task with result beside working", "Task", task(result={"x": 1}), True),
    ("task ttlMs null", "Task", task(ttlMs=None), True),
    ("task ttlMs negative", "Task", task(ttlMs=-5), True),
    ("get request", "GetTaskRequest", request("tasks/get", {"taskId": "t-1"}), True),
    ("get request with _meta", "GetTaskRequest",
     request("tasks/get", {"taskId": "t-1", "_meta": {}}), True),
    ("get request taskId 17", "GetTaskRequest", request("tasks/get", {"taskId": 17}), False),
    ("get request without taskId", "GetTaskRequest", request("tasks/get", {}), False),
    ("get request without params", "GetTaskRequest",
     {"jsonrpc": "2.0", "id": 7, "method": "tasks/get"}, False),
    ("get request without id", "GetTaskRequest",
     {"jsonrpc": "2.0", "method": "tasks/get", "params": {"taskId": "t"}}, False),
    ("get request jsonrpc 1.0", "GetTaskRequest",
     request("tasks/get", {"taskId": "t"}, jsonrpc="1.0"), False),
    ("get request of another method", "GetTaskRequest",
     request("tasks/cancel", {"taskId": "t"}), False),
    ("cancel request", "CancelTaskRequest", request("tasks/cancel", {"taskId": "t-1"}), True),
    ("cancel request without taskId", "CancelTaskRequest", request("tasks/cancel", {}), False),
    ("update request", "UpdateTaskRequest",
     request("tasks/update", {"taskId": "t-1", "inputResponses": {"confirm": ACCEPT}}), True),
    ("update request, empty responses", "UpdateTaskRequest",
     request("tasks/update", {"taskId": "t-1", "inputResponses": {}}), True),
    ("update request, roots answer", "UpdateTaskRequest",
     request("tasks/update", {"taskId": "t-1", "inputResponses": {"r": {"roots": [
         {"uri": "file:///tmp"}]}}}), True),
    ("update request without inputResponses", "UpdateTaskRequest",
     request("tasks/update", {"taskId": "t-1"}), False),
    ("update request, an answer of no known shape", "UpdateTaskRequest",
     request("tasks/update", {"taskId": "t-1", "inputResponses": {"k": {"ignored": True}}}),
     False),
    ("update request, action maybe", "UpdateTaskRequest",
     request("tasks/update", {"taskId": "t-1", "inputResponses": {"k": {"action": "maybe"}}}),
     False),
    ("update request taskId 17", "UpdateTaskRequest",
     request("tasks/update", {"taskId": 17, "inputResponses": {}}), False),
    ("update ack", "UpdateTaskResult", {"resultType": "complete"}, True),
    ("update ack with _meta", "UpdateTaskResult", {"resultType": "complete", "_meta": {}}, True),
    ("update ack without resultType", "UpdateTaskResult", {}, False),
    ("update ack as a task", "UpdateTaskResult", {"resultType": "task"}, False),
    ("cancel ack", "CancelTaskResult", {"resultType": "complete"}, True),
    ("cancel ack without resultType", "CancelTaskResult", {}, False),
    ("cancel ack input_required", "CancelTaskResult", {"resultType": "input_required"}, False),
    *[(f"notification {s}", "TaskStatusNotification", note(t), True)
      for s, t in DETAILED.items()],
    ("notification with _meta", "TaskStatusNotification",
     note({**task(), "_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"}}), True),
    ("notification ttlMs text", "TaskStatusNotification", note(task(ttlMs="x")), False),
    ("notification completed without result", "TaskStatusNotification",
     note(task(status="completed")), False),
    ("notification without params", "TaskStatusNotification",
     {"jsonrpc": "2.0", "method": "notifications/tasks"}, False),
    ("notification of another method", "TaskStatusNotification",
     {"jsonrpc": "2.0", "method": "notifications/task", "params": task()}, False),
]  # fmt: skip

#: Where the official validators and the SEP's types part, on purpose or by their engine:
#: (case, $def, message, our verdict, zod's verdict, why).
DIFFERENCES: list[tuple[str, str, object, bool, bool, str]] = [
    ("a ttlMs past 2**53", "CreateTaskResult", {"resultType": "task", **task(ttlMs=2**60)},
     True, False,
     "zod's z.int() refuses integers JavaScript cannot hold exactly; JSON Schema's integer "
     "has no bound and the SEP gives none"),
    ("a result _meta whose serverInfo is not an Implementation", "CreateTaskResult",
     {"resultType": "task", **task(), "_meta": {"io.modelcontextprotocol/serverInfo": 5}},
     False, True,
     "our results are core Results, whose _meta is the core ResultMetaObject; zod takes any "
     "JSON object"),
    ("a notification _meta whose subscriptionId is not a RequestId", "TaskStatusNotification",
     note({**task(), "_meta": {"io.modelcontextprotocol/subscriptionId": {"x": 1}}}),
     False, True,
     "our notification params are core NotificationParams (NotificationMetaObject); zod takes "
     "any JSON object"),
]  # fmt: skip


@pytest.fixture(scope="module")
def zod_verdicts() -> dict[str, tuple[bool, list[str]]]:
    """Each case's verdict from the package's validators, in one Node run."""
    folder = client_installs.npm_package(
        client_installs.EXT_TASKS_PACKAGE,
        client_installs.EXT_TASKS_VERSION,
        {"zod": client_installs.ZOD_VERSION},
    )
    cases = [(c[0], c[1], c[2]) for c in AGREED] + [(c[0], c[1], c[2]) for c in DIFFERENCES]
    corpus = [[ZOD[definition], message] for _, definition, message in cases]
    done = subprocess.run(
        [str(client_installs.node()), str(Path(SUPPORT) / "ext_tasks_verdicts.mjs"),
         str(folder)],
        input=json.dumps(corpus),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    verdicts = json.loads(done.stdout)
    assert len(verdicts) == len(cases)
    return {case: (ok, issues) for (case, _, _), (ok, issues) in zip(cases, verdicts, strict=True)}


@pytest.fixture(scope="module")
def ours() -> Schemas:
    return load_extension()


def test_the_corpus_names_each_case_once() -> None:
    names = [c[0] for c in AGREED] + [c[0] for c in DIFFERENCES]
    assert len(names) == len(set(names))
    assert {c[1] for c in AGREED} == set(ZOD)  # every $def is compared


@pytest.mark.parametrize(
    ("case", "definition", "message", "valid"), AGREED, ids=[c[0] for c in AGREED]
)
def test_our_schema_and_the_official_validators_agree(
    zod_verdicts: dict[str, tuple[bool, list[str]]],
    ours: Schemas,
    case: str,
    definition: str,
    message: object,
    valid: bool,
) -> None:
    zod_valid, issues = zod_verdicts[case]
    assert zod_valid is valid, issues
    assert ours.is_valid(definition, message) is valid, ours.violations(definition, message)
    assert (ours.violations(definition, message) == []) is valid


@pytest.mark.parametrize(
    ("case", "definition", "message", "our_verdict", "zod_verdict", "why"),
    DIFFERENCES,
    ids=[c[0] for c in DIFFERENCES],
)
def test_the_known_differences_are_as_written_down(
    zod_verdicts: dict[str, tuple[bool, list[str]]],
    ours: Schemas,
    case: str,
    definition: str,
    message: object,
    our_verdict: bool,
    zod_verdict: bool,
    why: str,
) -> None:
    assert zod_verdicts[case][0] is zod_verdict, why
    assert ours.is_valid(definition, message) is our_verdict, why
