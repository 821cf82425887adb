"""The testing client follows tasks whatever capabilities it was opened with: its task
methods declare the Tasks extension besides the client's own, unless the test says
otherwise with ``capabilities=``."""

from __future__ import annotations

import pytest
import trio

from presa_trio import Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import RpcError, open_client


def server() -> Server:
    built = Server("tasks")
    built.add_extension(TasksExtension())

    @built.tool(options={"tasks": "required"})
    async def job() -> str:
        """Finishes at once, as a task."""
        await trio.lowlevel.checkpoint()
        return "done"

    return built


async def test_a_client_with_default_capabilities_follows_a_task() -> None:
    async with open_client(server()) as client:
        task_id = await client.create_task("job")
        with trio.fail_after(5):
            task = await client.wait_task(task_id)
        assert task["result"]["content"] == [{"type": "text", "text": "done"}]
        assert (await client.cancel_task(task_id)) == {
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "tasks", "version": "0.1.0"}},
        }


async def test_capabilities_chosen_by_the_test_are_sent_as_they_are() -> None:
    async with open_client(server(), capabilities={"elicitation": {}}) as client:
        task_id = await client.create_task("job")  # the extension is added for it
        assert (await client.get_task(task_id))["taskId"] == task_id
        with pytest.raises(RpcError) as refused:
            await client.create_task("job", capabilities={})
        assert (refused.value.code, refused.value.status) == (-32021, 400)


async def test_listen_declares_the_tasks_extension_without_being_asked() -> None:
    async with open_client(server()) as client:
        task_id = await client.create_task("job")
        with trio.fail_after(5):
            await client.wait_task(task_id)
            async with client.listen({"taskIds": [task_id]}) as stream:
                ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}


async def test_listen_with_capabilities_chosen_by_the_test_sends_them_as_they_are() -> None:
    async with open_client(server()) as client:
        task_id = await client.create_task("job")
        with trio.fail_after(5):
            async with client.listen({"taskIds": [task_id]}, capabilities={}) as stream:
                refused = await stream.next()
        assert (stream.status, refused["error"]["code"]) == (400, -32021)
