"""What a task tells its listeners: no progress or log notifications, and each task notification
equal to what ``tasks/get`` answers at that moment."""

from __future__ import annotations

import trio
import trio.testing
from support.task_world import World, create, settle

from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import Client


async def test_no_progress_or_log_from_a_task(
    env: tuple[Client, TasksExtension], world: World
) -> None:
    client, _ = env
    meta = {"progressToken": "p", "io.modelcontextprotocol/logLevel": "debug"}
    created = await client.send(client.message("tools/call", {"name": "chatty"}, meta=meta))
    assert created.headers["content-type"] == "application/json" and created.notifications == []
    assert created.response is not None
    task_id = created.response["result"]["taskId"]
    with trio.fail_after(5):
        async with client.listen({"taskIds": [task_id]}) as stream:
            await stream.next()
            world.release.set()
            done = await settle(client, task_id)
            assert done["result"]["content"][0]["text"] == "quiet"
            note = await stream.next()  # only task status, never progress or log
            assert note["method"] == "notifications/tasks"
            assert note["params"]["status"] == "completed"


async def test_notifications_equal_tasks_get(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    task_id = await create(client, "ask", {"keys": ["a"]})
    with trio.fail_after(5):
        await _notifications_equal_tasks_get(client, task_id)


async def _notifications_equal_tasks_get(client: Client, task_id: str) -> None:
    async with client.listen({"taskIds": [task_id, "unknown-task", task_id]}) as stream:
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        await trio.testing.wait_all_tasks_blocked()
        await client.request(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {"a": {"action": "accept", "content": {"v": "1"}}},
            },
        )
        final = await settle(client, task_id)
        seen = []
        while True:
            note = await stream.next()
            seen.append(note["params"]["status"])
            if note["params"]["status"] == "completed":
                break
        expected = {k: v for k, v in final.items() if k not in ("resultType", "_meta")}
        params = {k: v for k, v in note["params"].items() if k != "_meta"}
        assert params == expected
        assert note["params"]["_meta"] == {
            "io.modelcontextprotocol/subscriptionId": ack["params"]["_meta"][
                "io.modelcontextprotocol/subscriptionId"
            ]
        }
        assert seen[-2:] == ["working", "completed"]
