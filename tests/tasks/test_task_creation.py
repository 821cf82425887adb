"""Creating a task (SEP-2663) through the ASGI app: the creation's shape, random ids, the outcomes a
task can end in, its own params and shared ``_meta``, and what is answered at once instead."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from support.task_service import tasks_of
from support.task_world import FakeClock, World, create, get, settle

from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import Client

SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "tasks", "version": "1"}}


async def test_creation_shape(env: tuple[Client, TasksExtension], clock: FakeClock) -> None:
    client, _ = env
    result = await client.call_tool("sleepy", {"seconds": 1})
    task_id = result["taskId"]
    assert len(task_id) == 32 and all(c.isalnum() or c in "-_" for c in task_id)
    assert result == {
        "resultType": "task",
        "taskId": task_id,
        "status": "working",
        "statusMessage": "Task accepted",
        "createdAt": "2027-01-15T08:00:00.000Z",
        "lastUpdatedAt": "2027-01-15T08:00:00.000Z",
        "ttlMs": 3_600_000,
        "pollIntervalMs": 250,
        "_meta": SERVER_INFO,
    }
    assert client.last.headers["content-type"] == "application/json"
    assert await get(client, task_id) == {**result, "resultType": "complete"}


async def test_task_ids_are_random(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    ids = {await create(client, "sleepy", {"seconds": 0}) for _ in range(20)}
    assert len(ids) == 20


async def test_completed_failed_and_tool_errors(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    done = await settle(client, await create(client, "sleepy", {"seconds": 0}))
    assert done["status"] == "completed" and "statusMessage" not in done
    assert done["result"] == {  # the tool's own result; serverInfo is on the tasks/get result
        "resultType": "complete",
        "content": [{"type": "text", "text": "slept"}],
        "structuredContent": {"result": "slept"},
    }
    assert done["_meta"] == SERVER_INFO
    failed = await settle(client, await create(client, "broken"))
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"] == {"code": -32603, "message": "Upstream refused"}
    assert failed["statusMessage"] == "Upstream refused"
    bug = await settle(client, await create(client, "explodes"))
    assert bug["error"] == {"code": -32603, "message": "Internal error"}
    assert "secret" not in str(bug)
    tool_error = await settle(client, await create(client, "tool_error"))
    assert tool_error["status"] == "completed" and tool_error["result"]["isError"] is True


async def test_a_task_asks_for_itself_whatever_its_extras_say(
    env: tuple[Client, TasksExtension],
) -> None:
    client, _ = env
    victim = await create(client, "ask", {"keys": ["a"]})
    meddler = await create(client, "meddles", {"victim": victim})
    await trio.testing.wait_all_tasks_blocked()
    assert list((await get(client, victim))["inputRequests"]) == ["a"]
    assert list((await get(client, meddler))["inputRequests"]) == ["m"]
    answer = {"m": {"action": "accept", "content": {"v": "mine"}}}
    await client.request("tasks/update", {"taskId": meddler, "inputResponses": answer})
    assert (await settle(client, meddler))["result"]["content"][0]["text"] == "mine"
    assert (await get(client, victim))["status"] == "input_required"
    await client.request("tasks/cancel", {"taskId": victim})


async def test_tasks_of_one_client_share_its_meta_and_keep_their_own_params(
    env: tuple[Client, TasksExtension], world: World
) -> None:
    client, _ = env
    for _ in range(2):
        await settle(client, await create(client, "remembers"))
    other = await client.call_tool("remembers", {}, meta={"progressToken": "p"})
    await settle(client, other["taskId"])
    first, second, third = world.contexts
    sent = client.message("tools/call", {})["params"]["_meta"]
    assert first.params["_meta"] == sent and first.meta.client_info == client.client_info
    assert second.params["_meta"] is first.params["_meta"] and second.meta is first.meta
    assert third.params["_meta"] == {**sent, "progressToken": "p"}
    assert third.params["_meta"] is not first.params["_meta"]
    assert third.meta.progress_token == "p" and first.meta.progress_token is None
    assert first.params is not second.params and first.params["name"] == "remembers"
    assert tasks_of(client).metas.share(dict(sent), first.meta)[0] is first.params["_meta"]


async def test_task_result_type_only_on_tools_call(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    assert (await client.call_tool("plain"))["resultType"] == "complete"
    for method in ("server/discover", "tools/list"):
        assert (await client.request(method))["resultType"] == "complete"
    task_id = await create(client, "sleepy", {"seconds": 0})
    assert (await get(client, task_id))["resultType"] == "complete"


async def test_legacy_task_param_is_ignored(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    client.validate = False
    result = await client.request(
        "tools/call", {"name": "plain", "task": {"ttl": 1, "pollInterval": 1}}
    )
    assert result["resultType"] == "complete"


async def test_invalid_arguments_answer_synchronously_without_a_task(
    env: tuple[Client, TasksExtension],
) -> None:
    client, _ext = env
    result = await client.call_tool("sleepy", {"seconds": "soon"})
    assert result["resultType"] == "complete" and result["isError"] is True
    assert await tasks_of(client).store.count() == 0


async def test_the_task_outlives_its_creating_request(
    env: tuple[Client, TasksExtension], world: World
) -> None:
    client, _ = env
    async with client.stream(
        "tools/call", {"name": "sleepy", "arguments": {"seconds": 1}}
    ) as stream:
        created = await stream.next()
        stream.disconnect()
    task_id = created["result"]["taskId"]
    await world.entered.wait()
    assert (await settle(client, task_id))["status"] == "completed"
    assert world.log == ["finally"]


async def test_testing_client_task_helpers(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    task_id = await client.create_task("ask", {"keys": ["k"]})
    with trio.fail_after(5):
        parked = await client.wait_task(task_id, ("input_required",))
        assert list(parked["inputRequests"]) == ["k"]
        ack = await client.update_task(task_id, {"k": {"action": "accept", "content": {"v": "ok"}}})
        assert ack["resultType"] == "complete"
        done = await client.wait_task(task_id)
    assert done["result"]["content"][0]["text"] == "ok"
    other = await client.create_task("sleepy")
    assert (await client.cancel_task(other))["resultType"] == "complete"
    assert (await client.get_task(other))["status"] == "cancelled"
    with pytest.raises(AssertionError):
        await client.create_task("plain")


def test_a_task_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """An id that starts with "-" would read as an option on a command line (presa-trio
    tasks show ID): such a draw is drawn again."""
    from presa_trio.ext.tasks import _extension

    draws = iter(["-first", "-second", "third"])
    monkeypatch.setattr(_extension.secrets, "token_urlsafe", lambda size: next(draws))
    assert _extension.new_task_id() == "third"
    monkeypatch.undo()
    assert all(not _extension.new_task_id().startswith("-") for _ in range(2_000))
