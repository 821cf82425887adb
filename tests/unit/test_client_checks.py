"""``_client/checks.py``: which ``$def`` each message of a client's conversation must meet,
per negotiated version, as values (pure, sync)."""

from __future__ import annotations

from typing import Any

import pytest

from presa_trio._client.checks import MessageChecks
from presa_trio._client.wire import TASKS_EXTENSION, modern_request

CAPS = {"io.modelcontextprotocol/clientCapabilities": {}}


def call(extensions: dict[str, Any] | None = None) -> dict[str, Any]:
    capabilities = {"extensions": extensions} if extensions is not None else {}
    return modern_request(
        1, "tools/call", {"name": "t"}, {"name": "c", "version": "1"}, capabilities=capabilities
    )


def answered(result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


def found(violations: list[Any]) -> list[tuple[str, str, str]]:
    return [(v.definition, v.pointer, v.message) for v in violations]


def test_a_version_without_a_vendored_schema_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no vendored schema for protocol version '2024-11-05'"):
        MessageChecks("2024-11-05")


def test_a_complete_result_is_checked_against_its_methods_type() -> None:
    checks = MessageChecks("2026-07-28")
    good = {"resultType": "complete", "content": [{"type": "text", "text": "x"}]}
    assert checks.response(answered(good), call()) == []
    bad = {"resultType": "complete", "content": [{"type": "text", "text": "x"}], "isError": 1}
    assert found(checks.response(answered(bad), call())) == [
        ("CallToolResult", "/isError", '1 is not of type "boolean"')
    ]


def test_a_task_result_passes_only_when_the_request_declared_the_extension() -> None:
    checks = MessageChecks("2026-07-28")
    when = "2026-11-03T18:04:05.123Z"
    task = {"resultType": "task", "taskId": "t1", "status": "working", "createdAt": when,
            "lastUpdatedAt": when, "ttlMs": None}  # fmt: skip
    assert checks.response(answered(task), call({TASKS_EXTENSION: {}})) == []
    # typed by the extension's CreateTaskResult, as the capture checker types it
    declared = call({TASKS_EXTENSION: {}})
    assert found(checks.response(answered({**task, "ttlMs": 1.5}), declared)) == [
        ("CreateTaskResult", "/ttlMs", '1.5 is not of types "null", "integer"')
    ]
    assert found(checks.response(answered(task), call())) == [
        (
            "Result",
            "/resultType",
            "'task' is not a result type of 2026-07-28 (complete, input_required); 'task'"
            " needs the Tasks extension, which the request did not declare",
        )
    ]


def test_a_task_answers_only_tools_call_and_task_methods_are_typed() -> None:
    checks = MessageChecks("2026-07-28")
    when = "2026-11-03T18:04:05.123Z"
    task = {"resultType": "task", "taskId": "t1", "status": "working", "createdAt": when,
            "lastUpdatedAt": when, "ttlMs": None}  # fmt: skip
    read = {**call({TASKS_EXTENSION: {}}), "method": "resources/read"}
    assert found(checks.response(answered(task), read)) == [
        ("CreateTaskResult", "/resultType", "resultType 'task' answers only tools/call, not "
         "resources/read")
    ]  # fmt: skip
    get = modern_request(
        2, "tasks/get", {"taskId": "t1"}, {"name": "c", "version": "1"}, capabilities={}
    )
    assert checks.request(get) == []
    assert found(checks.request({**get, "params": {}})) == [
        ("GetTaskRequest", "/params", '"taskId" is a required property'),
        ("RequestParams", "/params", '"_meta" is a required property'),
    ]
    assert found(checks.response(answered(task), get)) == [
        ("GetTaskResult", "/resultType", '"complete" was expected')
    ]
    done = {**task, "resultType": "complete", "status": "completed", "result": {}}
    assert checks.response(answered(done), get) == []
    note = {"jsonrpc": "2.0", "method": "notifications/tasks", "params": {**done, "ttlMs": "x"}}
    assert found(checks.server_notification(note))[0][:2] == (
        "TaskStatusNotification",
        "/params/ttlMs",
    )


def test_an_older_sessions_task_augmented_call_is_a_create_task_result() -> None:
    checks = MessageChecks("2025-11-25")
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "t", "task": {}},
    }
    created = {
        "task": {
            "taskId": "t1",
            "status": "working",
            "createdAt": "2025-11-25T00:00:00Z",
            "lastUpdatedAt": "2025-11-25T00:00:00Z",
            "ttl": None,
        }
    }
    assert checks.response(answered(created), request) == []
    assert found(checks.response(answered({"task": {"taskId": 1}}), request))[0][:2] == (
        "CreateTaskResult",
        "/task",
    )


def test_a_2026_server_sends_no_requests_and_an_older_one_is_typed() -> None:
    pushed = {"jsonrpc": "2.0", "id": 7, "method": "roots/list"}
    assert found(MessageChecks("2026-07-28").server_request(pushed)) == [
        ("JSONRPCMessage", "", "a 2026-07-28 server sent a request (roots/list)")
    ]
    assert MessageChecks("2025-11-25").server_request(pushed) == []
    bad = {"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {}}
    assert found(MessageChecks("2025-06-18").server_request(bad))[0][0] == "ElicitRequest"


def test_the_clients_answer_to_a_pushed_request_is_typed_by_its_method() -> None:
    checks = MessageChecks("2025-11-25")
    good = {"jsonrpc": "2.0", "id": 7, "result": {"action": "accept", "content": {"n": "A"}}}
    assert checks.answer("elicitation/create", good) == []
    bad = {"jsonrpc": "2.0", "id": 7, "result": {"action": "maybe"}}
    assert found(checks.answer("elicitation/create", bad))[0][:2] == ("ElicitResult", "/action")
    refused = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "no"}}
    assert checks.answer("elicitation/create", refused) == []


def test_the_clients_own_notifications_are_typed() -> None:
    checks = MessageChecks("2025-06-18")
    assert checks.notification({"jsonrpc": "2.0", "method": "notifications/initialized"}) == []
    assert (
        found(
            checks.notification(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}
            )
        )[0][0]
        == "CancelledNotification"
    )
