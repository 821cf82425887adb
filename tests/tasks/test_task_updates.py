"""``tasks/update``: answers fulfil a round in parts, a key is never reused, and what is not
outstanding (a finished task, a key never asked for, already answered, or given up on) is
acknowledged and changes nothing. A parked task holds no frame of its call chain."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing
from support.answers import poll_until_terminal
from support.ignored_answers import LOGGER, MESSAGE, ignored_keys
from support.task_service import WITH_TASKS, tasks_of
from support.task_world import (
    World,
    answer,
    create,
    ended,
    get,
    settle,
    update,
    update_unchecked,
)

from presa_trio import Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import Client, RpcError, open_client

SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
YES = {"action": "accept", "content": {"confirm": True}}


@pytest.mark.parametrize("ending", ["cancelled", "completed"])
async def test_update_on_a_finished_task_is_acknowledged_and_changes_nothing(
    fixture_server: Server, ending: str, caplog: pytest.LogCaptureFixture
) -> None:
    """SEP-2663: answers no one waits for are ignored; T§4.3: acknowledged, no change."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with open_client(fixture_server, capabilities=WITH_TASKS) as client:
        seconds = 3600 if ending == "cancelled" else 0
        task_id = await client.create_task("slow_compute", {"seconds": seconds, "label": "x"})
        if ending == "cancelled":
            await client.cancel_task(task_id)
        task, _ = await poll_until_terminal(client, task_id)
        assert task["status"] == ending
        ack = await client.update_task(task_id, {"confirm-delete": YES})
        assert client.last.status == 200
        assert ack["resultType"] == "complete" and list(ack["_meta"]) == [SERVER_INFO_KEY]
        assert await client.get_task(task_id) == task
        assert ignored_keys(caplog, task_id) == [["confirm-delete"]]


async def test_update_with_a_key_never_asked_for_is_acknowledged_and_logged(
    fixture_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with open_client(fixture_server, capabilities=WITH_TASKS) as client:
        task_id = await client.create_task("confirm_delete", {"filename": "a.txt"})
        with trio.fail_after(10):
            await client.wait_task(task_id, ("input_required",))
        ack = await client.update_task(task_id, {"that-key": YES})
        assert client.last.status == 200
        assert list(ack["_meta"]) == [SERVER_INFO_KEY]  # nothing about the keys on the wire
        assert ignored_keys(caplog, task_id) == [["that-key"]]
        await trio.testing.wait_all_tasks_blocked()
        still = await client.get_task(task_id)
        assert still["status"] == "input_required"
        assert list(still["inputRequests"]) == ["confirm-delete"]
        mixed = await client.update_task(task_id, {"confirm-delete": YES, "zzz": YES, "a": YES})
        assert mixed == ack
        assert ignored_keys(caplog, task_id) == [["that-key"], ["a", "zzz"]]
        done, _ = await poll_until_terminal(client, task_id)
        assert done["result"]["content"][0]["text"] == "Delete confirmed: true"


SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "tasks", "version": "1"}}
ACK = {"resultType": "complete", "_meta": SERVER_INFO}  # a tasks/update or tasks/cancel ack


def _suspended(coro: Any) -> dict[str, Any]:
    """The frames a suspended task is inside (by function), outermost first."""
    frames = {}
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or coro.gi_frame
        frames[frame.f_code.co_qualname] = frame
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def _frames(coro: Any) -> list[str]:
    return list(_suspended(coro))


async def test_a_parked_task_holds_no_frame_of_the_call_chain(
    env: tuple[Client, TasksExtension],
) -> None:
    """Each suspended frame is a few hundred bytes a parked task holds for its whole wait:
    nothing of the creating request's chain (dispatcher, handler) stays, and each link from
    the runner to the tool is one ``async def`` frame: the runner's one (the task's work is
    the tools/call chain itself, with no handle), ``call_tool`` (the chain's end, which
    awaits the handler itself), the tool, ``Context.input`` and the parked wait."""
    client, _ext = env
    task_id = await create(client, "ask", {"keys": ["a"]})
    await trio.testing.wait_all_tasks_blocked()
    (task,) = tasks_of(client).runner.nursery.child_tasks
    frames = _frames(task.coro)
    assert frames[: frames.index("_TaskInput.__call__") + 1] == [
        "TaskRunner._run",
        "call_tool",
        "build.<locals>.ask",
        "Context.input",
        "_TaskInput.__call__",
    ]  # then trio's own, down to the channel's receive
    await client.request("tasks/cancel", {"taskId": task_id})


async def test_updates_partial_fulfilment_and_key_reuse(
    env: tuple[Client, TasksExtension], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ext = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    task_id = await create(client, "ask", {"keys": ["a", "b", "a"]})
    await trio.testing.wait_all_tasks_blocked()
    assert list((await get(client, task_id))["inputRequests"]) == ["a"]
    ack = await client.request(
        "tasks/update",
        {
            "taskId": task_id,
            "inputResponses": {
                "a": {"action": "accept", "content": {"v": "1"}},
                "stray": {"action": "decline"},
            },
        },
    )
    # Acknowledged (SEP-2663); the key the task was not waiting for is named to operators.
    assert ack == ACK
    assert ignored_keys(caplog, task_id) == [["stray"]]
    await trio.testing.wait_all_tasks_blocked()
    assert list((await get(client, task_id))["inputRequests"]) == ["b"]
    await client.request(
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"b": {"action": "accept", "content": {"v": "2"}}}},
    )
    failed = await settle(client, task_id)  # asking for "a" again is a bug in the tool
    assert failed["status"] == "failed" and failed["error"]["code"] == -32603
    assert tasks_of(client).runner.parked_count() == 0


async def test_one_round_of_questions_answered_in_parts(
    env: tuple[Client, TasksExtension], caplog: pytest.LogCaptureFixture
) -> None:
    """The questions of one ``ctx.input`` share the task's channel: each answer reaches the
    tool under its own key, in whatever order and updates they come, each exactly once."""
    client, _ext = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    runner = tasks_of(client).runner
    task_id = await create(client, "asks_at_once", {"keys": ["a", "b", "c"]})
    await trio.testing.wait_all_tasks_blocked()
    assert list((await get(client, task_id))["inputRequests"]) == ["a", "b", "c"]
    assert runner.parked_count() == 3
    channels = {id(send) for _, send in runner._live[task_id].parked}
    assert len(channels) == 1  # one channel for the round, not one per question

    def answer(value: str) -> dict[str, Any]:
        return {"action": "accept", "content": {"v": value}}

    await client.request("tasks/update", {"taskId": task_id, "inputResponses": {"c": answer("3")}})
    await trio.testing.wait_all_tasks_blocked()
    assert list((await get(client, task_id))["inputRequests"]) == ["a", "b"]
    assert runner.parked_count() == 2
    ack = await client.request(
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"c": answer("again"), "a": answer("1")}},
    )
    assert ack == ACK
    assert ignored_keys(caplog, task_id) == [["c"]]  # answered already
    await trio.testing.wait_all_tasks_blocked()
    assert list((await get(client, task_id))["inputRequests"]) == ["b"]
    await client.request("tasks/update", {"taskId": task_id, "inputResponses": {"b": answer("2")}})
    done = await settle(client, task_id)
    assert done["result"]["content"] == [{"type": "text", "text": "a=1,b=2,c=3"}]
    assert (runner.parked_count(), runner.live_count) == (0, 0)


async def test_invalid_update_bodies(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    task_id = await create(client, "ask", {"keys": ["a"]})
    await trio.testing.wait_all_tasks_blocked()
    for responses in (None, [], {"": {}}, {"a": 5}, {"a": {"action": "maybe"}}):
        with pytest.raises(RpcError) as caught:
            await update_unchecked(client, task_id, responses)
        assert caught.value.code == -32602
    assert (await get(client, task_id))["status"] == "input_required"


@pytest.mark.parametrize("ending", ["completed", "failed", "cancelled"])
async def test_an_update_for_a_finished_task_is_acknowledged_and_changes_nothing(
    env: tuple[Client, TasksExtension], caplog: pytest.LogCaptureFixture, ending: str
) -> None:
    """SEP-2663 and T§4.3: acknowledged with no change; the operator sees why."""
    client, _ = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    task_id = await ended(client, ending)
    before = await get(client, task_id)
    ack = await update_unchecked(client, task_id, {"a": answer("late"), "b": {"x": 1}})
    assert (ack, client.last.status) == (ACK, 200)  # no ignored keys on the wire
    assert await get(client, task_id) == before
    assert ignored_keys(caplog, task_id) == [["a", "b"]]
    (logged,) = [r for r in caplog.records if r.msg == MESSAGE]
    assert logged.getMessage() == (
        f"tasks/update of task {task_id} ignored input keys ['a', 'b']: the task is {ending}"
    )
    with pytest.raises(RpcError) as caught:  # a malformed update is refused all the same
        await update_unchecked(client, task_id, {"a": 5})
    assert (caught.value.code, caught.value.status) == (-32602, 400)


async def test_an_answer_to_a_key_never_asked_for_is_ignored_and_acknowledged(
    env: tuple[Client, TasksExtension], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    task_id = await create(client, "ask", {"keys": ["a"]})
    await trio.testing.wait_all_tasks_blocked()
    before = await get(client, task_id)
    # Not checked against any request (there is none): ignored, whatever its shape.
    assert await update_unchecked(client, task_id, {"zzz": {"action": "maybe"}}) == ACK
    await trio.testing.wait_all_tasks_blocked()
    assert await get(client, task_id) == before
    assert tasks_of(client).runner.parked_count() == 1
    assert ignored_keys(caplog, task_id) == [["zzz"]]
    assert await update(client, task_id, {"a": answer("1")}) == ACK
    assert (await settle(client, task_id))["result"]["content"][0]["text"] == "1"
    assert ignored_keys(caplog, task_id) == [["zzz"]]  # the answer used is not reported


async def test_an_answer_to_a_key_already_answered_is_ignored_and_acknowledged(
    env: tuple[Client, TasksExtension], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    task_id = await create(client, "asks_at_once", {"keys": ["a", "b"]})
    await trio.testing.wait_all_tasks_blocked()
    assert await update(client, task_id, {"a": answer("first")}) == ACK
    await trio.testing.wait_all_tasks_blocked()
    before = await get(client, task_id)
    assert list(before["inputRequests"]) == ["b"]
    assert await update(client, task_id, {"a": answer("second")}) == ACK
    assert await update_unchecked(client, task_id, {"a": {"action": "maybe"}}) == ACK
    await trio.testing.wait_all_tasks_blocked()
    assert await get(client, task_id) == before
    assert ignored_keys(caplog, task_id) == [["a"], ["a"]]
    assert await update(client, task_id, {"b": answer("2")}) == ACK
    done = await settle(client, task_id)
    assert done["result"]["content"] == [{"type": "text", "text": "a=first,b=2"}]


async def test_an_answer_to_a_key_the_tool_stopped_waiting_for_is_ignored(
    env: tuple[Client, TasksExtension],
    world: World,
    caplog: pytest.LogCaptureFixture,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A key is superseded when the tool's own wait for it ended (its ``move_on_after``
    around ``ctx.input``) and the task goes on: the record drops it, and an answer to it is
    ignored and acknowledged."""
    client, _ = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    runner = tasks_of(client).runner
    task_id = await create(client, "impatient", {"seconds": 10})
    await trio.testing.wait_all_tasks_blocked()
    assert list((await get(client, task_id))["inputRequests"]) == ["late"]
    await trio.sleep(10)  # the tool gives up on "late" and works on
    await trio.testing.wait_all_tasks_blocked()
    working = await get(client, task_id)
    assert working["status"] == "working" and "inputRequests" not in working
    assert (runner.live_count, runner.parked_count()) == (1, 0)
    assert await update(client, task_id, {"late": answer("too late")}) == ACK
    await trio.testing.wait_all_tasks_blocked()
    assert await get(client, task_id) == working
    assert ignored_keys(caplog, task_id) == [["late"]]
    world.release.set()
    await trio.testing.wait_all_tasks_blocked()
    assert list((await get(client, task_id))["inputRequests"]) == ["next"]
    assert await update(client, task_id, {"next": answer("n")}) == ACK
    done = await settle(client, task_id)
    assert done["result"]["content"] == [{"type": "text", "text": "gave up on late; next=n"}]
    assert ignored_keys(caplog, task_id) == [["late"]]


async def test_a_partial_set_of_answers_is_accepted_and_the_rest_stay_outstanding(
    env: tuple[Client, TasksExtension], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    task_id = await create(client, "asks_at_once", {"keys": ["a", "b", "c"]})
    await trio.testing.wait_all_tasks_blocked()
    assert await update(client, task_id, {"c": answer("3"), "a": answer("1")}) == ACK
    await trio.testing.wait_all_tasks_blocked()
    parked = await get(client, task_id)
    assert parked["status"] == "input_required" and list(parked["inputRequests"]) == ["b"]
    assert tasks_of(client).runner.parked_count() == 1
    assert await update(client, task_id, {"b": answer("2")}) == ACK
    done = await settle(client, task_id)
    assert done["result"]["content"] == [{"type": "text", "text": "a=1,b=2,c=3"}]
    assert ignored_keys(caplog, task_id) == []  # every answer was used
