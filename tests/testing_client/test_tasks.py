"""``presa_trio.testing``'s client of any server checks Tasks-extension (SEP-2663) messages
with the same ``ExtensionCatalog`` as the in-process client and the capture checker: a task
result, ``tasks/get``, ``tasks/update``, ``tasks/cancel`` and ``notifications/tasks``, both
ways. Against presa_trio's own server with the extension over HTTP (a whole conversation, no
violation), and a hand-written server (stdio and HTTP) that breaks one task message."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio
from support.servers import SUPPORT, running

from presa_trio.testing import RemoteClient, SchemaViolationError, open_http, open_stdio

pytestmark = pytest.mark.e2e

TASKS = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
TERMINAL = {"completed", "failed", "cancelled"}
SCRIPT = str(SUPPORT / "broken_server.py")


@pytest.fixture(scope="module")
def tasks_url() -> Iterator[str]:
    with running("tasks_app:app", SUPPORT) as served:
        yield f"http://127.0.0.1:{served.port}/mcp"


@pytest.fixture(scope="module")
def broken_port() -> Iterator[int]:
    with running("broken_server:app", SUPPORT) as served:
        yield served.port


def broken(
    transport: str, name: str, request: pytest.FixtureRequest
) -> AbstractAsyncContextManager[RemoteClient]:
    if transport == "stdio":
        return open_stdio([sys.executable, SCRIPT, name], capabilities=TASKS)
    port = request.getfixturevalue("broken_port")
    return open_http(f"http://127.0.0.1:{port}/{name}", capabilities=TASKS)


async def settled(client: RemoteClient, task_id: str, until: set[str]) -> dict[str, Any]:
    """``tasks/get`` until the task's status is one of ``until`` or terminal (the caller
    bounds the wait)."""
    while True:
        found = await client.request("tasks/get", {"taskId": task_id})
        if found["status"] in until | TERMINAL:
            return found
        await trio.sleep(found.get("pollIntervalMs", 50) / 1000)


async def test_a_whole_task_conversation_with_presa_trio_passes_the_checks(
    tasks_url: str,
) -> None:
    with trio.fail_after(60):
        async with open_http(tasks_url, capabilities=TASKS) as client:
            created = await client.request(
                "tools/call", {"name": "slow_add", "arguments": {"a": 1, "b": 2}}
            )
            assert (created["resultType"], created["status"]) == ("task", "working")
            done = await settled(client, created["taskId"], set())
            assert done["status"] == "completed"
            assert done["result"]["content"][0]["text"] == "3"

            asking = await client.request("tools/call", {"name": "ask_name", "arguments": {}})
            parked = await settled(client, asking["taskId"], {"input_required"})
            assert parked["status"] == "input_required", parked
            [key] = parked["inputRequests"]
            answer = {"action": "accept", "content": {"name": "Ada"}}
            ack = await client.request(
                "tasks/update", {"taskId": asking["taskId"], "inputResponses": {key: answer}}
            )
            assert ack["resultType"] == "complete"
            greeted = await settled(client, asking["taskId"], set())
            assert greeted["result"]["content"][0]["text"] == "Hello, Ada"

            endless = await client.request("tools/call", {"name": "forever", "arguments": {}})
            cancelled = await client.request("tasks/cancel", {"taskId": endless["taskId"]})
            assert cancelled["resultType"] == "complete"
            assert (await settled(client, endless["taskId"], set()))["status"] == "cancelled"


async def test_an_outgoing_task_request_is_checked_before_it_is_sent(tasks_url: str) -> None:
    with trio.fail_after(30):
        async with open_http(tasks_url, capabilities=TASKS) as client:
            with pytest.raises(SchemaViolationError) as raised:
                await client.request("tasks/get", {"taskId": 17})
    assert str(raised.value) == 'GetTaskRequest at /params/taskId: 17 is not of type "string"'


ON_TASK = {
    "task-bogus": (
        "tools/call",
        'CreateTaskResult at /taskId: 17 is not of type "string"\n'
        'CreateTaskResult at /status: "bogus" is not one of "working", "input_required", '
        '"completed", "failed", "cancelled"',
    ),
    "task-get-no-result": ("tasks/get", 'GetTaskResult at /: "result" is a required property'),
    "task-note-bogus": (
        "tasks/get",
        'TaskStatusNotification at /params/ttlMs: "x" is not of types "null", "integer"',
    ),
    "task-cancel-as-task": (
        "tasks/cancel",
        'CancelTaskResult at /resultType: "complete" was expected',
    ),
}


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("name", sorted(ON_TASK))
async def test_a_broken_task_message_raises_naming_its_def_and_pointer(
    transport: str, name: str, request: pytest.FixtureRequest
) -> None:
    method, expected = ON_TASK[name]
    with trio.fail_after(30):
        async with broken(transport, name, request) as client:
            with pytest.raises(SchemaViolationError) as raised:
                created = await client.request("tools/call", {"name": "echo", "arguments": {}})
                await client.request(method, {"taskId": created["taskId"]})
    assert str(raised.value) == expected


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_same_server_passes_where_it_does_not_break(
    transport: str, request: pytest.FixtureRequest
) -> None:
    with trio.fail_after(30):
        async with broken(transport, "task-get-no-result", request) as client:
            created = await client.request("tools/call", {"name": "echo", "arguments": {}})
            assert created["resultType"] == "task"
            assert await client.request("tasks/cancel", {"taskId": "t1"}) == {
                "resultType": "complete"
            }
