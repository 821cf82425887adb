"""``presa_trio.testing.Client`` checks Tasks-extension messages against the extension's
schema, both ways, and refuses a ``resultType`` nothing defines."""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.conformance import build_server
from presa_trio.testing import Client, SchemaViolationError

WHEN = "2026-11-03T18:04:05.123Z"
TASK = {"taskId": "t-1", "status": "working", "createdAt": WHEN, "lastUpdatedAt": WHEN,
        "ttlMs": 1000}  # fmt: skip


@pytest.fixture
def client() -> Client:
    return Client(build_server().asgi_app())


def answer(result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


def test_a_bogus_task_is_refused_at_its_leaves(client: Client) -> None:
    client.check_incoming(answer({"resultType": "task", **TASK}), "tools/call")
    with pytest.raises(SchemaViolationError) as caught:
        client.check_incoming(
            answer({"resultType": "task", **TASK, "taskId": 17, "status": "bogus"}), "tools/call"
        )
    assert str(caught.value).splitlines() == [
        'CreateTaskResult at /taskId: 17 is not of type "string"',
        'CreateTaskResult at /status: "bogus" is not one of "working", "input_required", '
        '"completed", "failed", "cancelled"',
    ]


def test_task_results_and_notifications_are_checked(client: Client) -> None:
    with pytest.raises(SchemaViolationError, match='GetTaskResult at /: "result" is a required'):
        client.check_incoming(
            answer({"resultType": "complete", **TASK, "status": "completed"}), "tasks/get"
        )
    note = {"jsonrpc": "2.0", "method": "notifications/tasks", "params": {**TASK, "ttlMs": "x"}}
    with pytest.raises(SchemaViolationError, match="TaskStatusNotification at /params/ttlMs"):
        client.check_incoming(note, "subscriptions/listen")


def test_an_unknown_result_type_is_refused(client: Client) -> None:
    with pytest.raises(SchemaViolationError, match="'completed' is neither complete"):
        client.check_incoming(answer({"resultType": "completed", "content": []}), "tools/call")


def test_outgoing_task_requests_are_checked(client: Client) -> None:
    client.check_outgoing(client.message("tasks/get", {"taskId": "t-1"}))
    with pytest.raises(SchemaViolationError, match='GetTaskRequest at /params: "taskId"'):
        client.check_outgoing(client.message("tasks/get", {}))
    bare = {"jsonrpc": "2.0", "id": 3, "method": "tasks/cancel", "params": {"taskId": "t-1"}}
    with pytest.raises(SchemaViolationError, match='RequestParams at /params: "_meta" is a req'):
        client.check_outgoing(bare)


def test_a_task_answering_anything_but_tools_call_is_refused(client: Client) -> None:
    with pytest.raises(SchemaViolationError) as caught:
        client.check_incoming(answer({"resultType": "task", **TASK}), "resources/read")
    assert str(caught.value) == (
        "CreateTaskResult at /resultType: resultType 'task' answers only tools/call, not "
        "resources/read"
    )
