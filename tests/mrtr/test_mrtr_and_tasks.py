"""MRTR meeting tasks: a task never asks for what the client did not declare, input responses
without a ``requestState`` do not answer a task, and a verified MRTR round can go on as a task."""

from __future__ import annotations

import trio
import trio.testing
from support.answers import poll_until_terminal
from support.task_service import TASKS, WITH_TASKS

from presa_trio import Server
from presa_trio.ext.tasks import EXTENSION_ID
from presa_trio.testing import open_client

YES = {"action": "accept", "content": {"confirm": True}}
ALICE = {"action": "accept", "content": {"name": "Alice"}}


async def test_a_task_never_asks_for_what_the_client_did_not_declare(
    fixture_server: Server,
) -> None:
    async with open_client(fixture_server, capabilities=TASKS) as client:
        task_id = await client.create_task("confirm_delete", {"filename": "a.txt"})
        task, seen = await poll_until_terminal(client, task_id)
        assert task["status"] == "failed"
        assert task["error"]["code"] == -32021
        assert task["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}
        assert "input_required" not in seen
        assert "inputRequests" not in task
        runtime = client.app.runtime
        assert runtime is not None
        assert runtime.service(EXTENSION_ID).runner.parked_count() == 0


async def test_input_responses_without_request_state_do_not_answer_a_task(
    fixture_server: Server,
) -> None:
    async with open_client(fixture_server, capabilities=WITH_TASKS) as client:
        result = await client.call_tool(
            "confirm_delete", {"filename": "a.txt"}, input_responses={"confirm-delete": YES}
        )
        assert result["resultType"] == "task"
        task_id = result["taskId"]
        with trio.fail_after(10):
            parked = await client.wait_task(task_id, ("input_required", "completed", "failed"))
        assert parked["status"] == "input_required"
        assert list(parked["inputRequests"]) == ["confirm-delete"]
        await client.update_task(task_id, {"confirm-delete": YES})
        done, _ = await poll_until_terminal(client, task_id)
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "Delete confirmed: true"}]


async def test_mrtr_round_then_a_task_with_a_verified_state(fixture_server: Server) -> None:
    async with open_client(fixture_server, capabilities=WITH_TASKS) as client:
        first = await client.call_tool("test_tool_with_task", {})
        assert first["resultType"] == "input_required"
        assert list(first["inputRequests"]) == ["user_name"]
        created = await client.call_tool(
            "test_tool_with_task",
            {},
            input_responses={"user_name": ALICE},
            request_state=first["requestState"],
        )
        assert created["resultType"] == "task"
        done, seen = await poll_until_terminal(client, created["taskId"])
        assert "input_required" not in seen
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "Hello, Alice"}]
