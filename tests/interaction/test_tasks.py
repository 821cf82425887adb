"""The Tasks extension end to end through the ASGI app (SEP-2663), beyond what the runner checks."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from ignored_answers import LOGGER, MESSAGE, ignored_keys

from presa_trio import Context, InternalError, Server, ToolError, Validation
from presa_trio.ext.tasks import (
    EXTENSION_ID,
    MemoryTaskStore,
    Status,
    TaskLimits,
    TaskRecord,
    TasksExtension,
)
from presa_trio.ext.tasks._runner import COMMIT_SECONDS, RESETTLE_SECONDS
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, RpcError, open_client

TASKS = {"extensions": {EXTENSION_ID: {}}}
WITH_TASKS = {"elicitation": {}, **TASKS}
MISSING = {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "tasks", "version": "1"}}
ACK = {"resultType": "complete", "_meta": SERVER_INFO}  # a tasks/update or tasks/cancel ack


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class World:
    """What the tools saw, for assertions."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.entered = trio.Event()
        self.release = trio.Event()
        self.contexts: list[Context] = []


def build(world: World, clock: FakeClock, **options: Any) -> tuple[Server, TasksExtension]:
    server = Server("tasks", "1", validation=Validation(outbound=True))
    ext = TasksExtension(clock=clock, principal=_principal, **options)
    server.add_extension(ext)

    @server.tool(options={"tasks": "optional"})
    async def sleepy(seconds: float = 3600) -> str:
        """Sleeps, cleaning up when cancelled."""
        world.entered.set()
        try:
            await trio.sleep(seconds)
        finally:
            world.log.append("finally")
        return "slept"

    @server.tool(options={"tasks": "optional"})
    async def ask(ctx: Context, keys: list[str]) -> str:
        """Parks on each key in turn."""
        got = []
        for key in keys:
            answer = await ctx.input({key: elicit(f"{key}?", {"v": {"type": "string"}})})
            got.append(answer[key]["content"]["v"])
        return ",".join(got)

    @server.tool(options={"tasks": "optional"})
    async def asks_at_once(ctx: Context, keys: list[str]) -> str:
        """Parks once on every key together."""
        questions = {key: elicit(f"{key}?", {"v": {"type": "string"}}) for key in keys}
        answers = await ctx.input(questions)
        return ",".join(f"{key}={answers[key]['content']['v']}" for key in sorted(answers))

    @server.tool(options={"tasks": "optional"})
    async def impatient(ctx: Context, seconds: float) -> str:
        """Waits ``seconds`` for "late"; without it, asks "next" once the test releases it."""
        with trio.move_on_after(seconds):
            answer = await ctx.input({"late": elicit("late?", {"v": {"type": "string"}})})
            return f"late={answer['late']['content']['v']}"
        await world.release.wait()
        answer = await ctx.input({"next": elicit("next?", {"v": {"type": "string"}})})
        return f"gave up on late; next={answer['next']['content']['v']}"

    @server.tool(options={"tasks": "optional"})
    async def blob(size: int) -> str:
        """A result of about ``size`` bytes."""
        await trio.lowlevel.checkpoint()
        return "x" * size

    @server.tool(options={"tasks": "optional"})
    async def meddles(ctx: Context, victim: str) -> str:
        """Writes another task's id into its own extras, then asks."""
        ctx.extras["task_id"] = victim
        answer = await ctx.input({"m": elicit("m?", {"v": {"type": "string"}})})
        return str(answer["m"]["content"]["v"])

    @server.tool(options={"tasks": "optional"})
    async def remembers(ctx: Context) -> str:
        """Keeps its context for the test to look at."""
        await trio.lowlevel.checkpoint()
        world.contexts.append(ctx)
        return "remembered"

    @server.tool(options={"tasks": "optional"})
    async def chatty(ctx: Context) -> str:
        """Tries to report progress and log from inside a task."""
        await world.release.wait()
        await ctx.progress(1, 2)
        await ctx.log("error", "from a task")
        return "quiet"

    @server.tool(options={"tasks": "required"})
    def broken() -> str:
        """A protocol failure."""
        raise InternalError("Upstream refused")

    @server.tool(options={"tasks": "required"})
    def explodes() -> str:
        """A bug."""
        raise RuntimeError("secret detail")

    @server.tool(options={"tasks": "required"})
    def tool_error() -> str:
        """A tool error."""
        raise ToolError("no such file")

    @server.tool()
    def plain() -> str:
        """Always synchronous."""
        return "plain"

    @server.tool(options={"tasks": "required"})
    async def only_as_task(text: str) -> str:
        """Runs only as a task."""
        await trio.lowlevel.checkpoint()
        return text

    return server, ext


def _principal(ctx: Context) -> str:
    info = ctx.meta.client_info or {}
    return str(info.get("name", ""))


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def env(world: World, clock: FakeClock) -> AsyncIterator[tuple[Client, TasksExtension]]:
    server, ext = build(world, clock)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        yield client, ext


def tasks_of(client: Client) -> Any:
    """The tasks service of the run ``client`` talks to (its store and runner)."""
    runtime = client.app.runtime
    assert runtime is not None
    return runtime.service(EXTENSION_ID)


async def create(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    result = await client.call_tool(tool, arguments or {})
    assert result["resultType"] == "task", result
    task_id: str = result["taskId"]
    return task_id


async def get(client: Client, task_id: str, **options: Any) -> dict[str, Any]:
    return await client.request("tasks/get", {"taskId": task_id}, **options)


async def settle(client: Client, task_id: str) -> dict[str, Any]:
    with trio.fail_after(5):
        while True:
            task = await get(client, task_id)
            if task["status"] in ("completed", "failed", "cancelled"):
                return task
            await trio.testing.wait_all_tasks_blocked()


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


async def test_cancel_runs_cleanup_before_the_ack(
    env: tuple[Client, TasksExtension], world: World, mock_clock: trio.testing.MockClock
) -> None:
    client, _ext = env
    task_id = await create(client, "sleepy")
    await world.entered.wait()
    start = trio.current_time()
    ack = await client.request("tasks/cancel", {"taskId": task_id})
    assert ack == {"resultType": "complete", "_meta": SERVER_INFO}
    assert world.log == ["finally"]  # the tool's cleanup ran before the ack was sent
    assert trio.current_time() == start  # and no clock time passed
    task = await get(client, task_id)
    assert (task["status"], task["statusMessage"]) == ("cancelled", "Cancellation requested")
    assert tasks_of(client).runner.live_count == 0


async def test_cancelling_a_parked_task_releases_its_channel(
    env: tuple[Client, TasksExtension], mock_clock: trio.testing.MockClock
) -> None:
    client, _ext = env
    task_id = await create(client, "ask", {"keys": ["a"]})
    await trio.testing.wait_all_tasks_blocked()
    assert (await get(client, task_id))["status"] == "input_required"
    assert tasks_of(client).runner.parked_count() == 1
    start = trio.current_time()
    await client.request("tasks/cancel", {"taskId": task_id})
    assert trio.current_time() == start  # released at the ack, no clock time needed
    assert tasks_of(client).runner.parked_count() == 0 and tasks_of(client).runner.live_count == 0
    assert (await get(client, task_id))["status"] == "cancelled"
    assert (
        len(tasks_of(client).runner.nursery.child_tasks) == 0
    )  # every task ended: the runner holds none


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
    the runner to the tool is one ``async def`` frame: the runner's two, the task's work,
    the end of the tools/call chain, the tool call, the handler's call, the tool,
    ``Context.input`` and the parked wait."""
    client, _ext = env
    task_id = await create(client, "ask", {"keys": ["a"]})
    await trio.testing.wait_all_tasks_blocked()
    (task,) = tasks_of(client).runner.nursery.child_tasks
    frames = _frames(task.coro)
    assert frames[: frames.index("_TaskInput.__call__") + 1] == [
        "TaskRunner._run",
        "TaskRunner._attempt",
        "_ToolCall.__call__",
        "_call",
        "Tool.call",
        "Signature.call",
        "build.<locals>.ask",
        "Context.input",
        "_TaskInput.__call__",
    ]  # then trio's own, down to the channel's receive
    await client.request("tasks/cancel", {"taskId": task_id})


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


async def test_terminal_cancel_is_acked_and_changes_nothing(
    env: tuple[Client, TasksExtension],
) -> None:
    client, _ = env
    task_id = await create(client, "sleepy", {"seconds": 0})
    done = await settle(client, task_id)
    assert await client.request("tasks/cancel", {"taskId": task_id}) == {
        "resultType": "complete",
        "_meta": SERVER_INFO,
    }
    assert await get(client, task_id) == done


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_unknown_ids(env: tuple[Client, TasksExtension], method: str) -> None:
    client, _ = env
    params: dict[str, Any] = {"taskId": "no-such-task"}
    if method == "tasks/update":
        params["inputResponses"] = {}
    with pytest.raises(RpcError) as caught:
        await client.request(method, params)
    assert (caught.value.code, caught.value.status) == (-32602, 400)


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, -32602),
        ({"taskId": ""}, -32602),
        ({"taskId": 5}, -32602),
        ({"taskId": "x" * 257}, -32602),
    ],
)
async def test_bad_task_ids(
    env: tuple[Client, TasksExtension], params: dict[str, Any], code: int
) -> None:
    client, _ = env
    client.validate = False
    message = client.message("tasks/get", params)
    headers = client.headers_for(message)
    if not any(name == "mcp-name" for name, _ in headers):
        headers.append(("mcp-name", "x"))
    result = await client.send(message, headers)
    assert result.response is not None and result.response["error"]["code"] == code


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
            "inputResponses": {"a": {"action": "accept", "content": {"v": "1"}}, "stray": {"x": 1}},
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
    channels = {id(send) for send in runner._live[task_id].parked.values()}
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
            await client.request("tasks/update", {"taskId": task_id, "inputResponses": responses})
        assert caught.value.code == -32602
    assert (await get(client, task_id))["status"] == "input_required"


# ------------------------------------------------ tasks/update: what is not outstanding


def answer(value: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"v": value}}


async def update(client: Client, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    return await client.request("tasks/update", {"taskId": task_id, "inputResponses": responses})


async def ended(client: Client, ending: str) -> str:
    """A task of this client that ended ``ending``."""
    if ending == "completed":
        task_id = await create(client, "sleepy", {"seconds": 0})
    elif ending == "failed":
        task_id = await create(client, "broken")
    else:
        task_id = await create(client, "ask", {"keys": ["a"]})
        await trio.testing.wait_all_tasks_blocked()
        await client.request("tasks/cancel", {"taskId": task_id})
    assert (await settle(client, task_id))["status"] == ending
    return task_id


@pytest.mark.parametrize("ending", ["completed", "failed", "cancelled"])
async def test_an_update_for_a_finished_task_is_acknowledged_and_changes_nothing(
    env: tuple[Client, TasksExtension], caplog: pytest.LogCaptureFixture, ending: str
) -> None:
    """SEP-2663 and T§4.3: acknowledged with no change; the operator sees why."""
    client, _ = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    task_id = await ended(client, ending)
    before = await get(client, task_id)
    ack = await update(client, task_id, {"a": answer("late"), "b": {"x": 1}})
    assert (ack, client.last.status) == (ACK, 200)  # no ignored keys on the wire
    assert await get(client, task_id) == before
    assert ignored_keys(caplog, task_id) == [["a", "b"]]
    (logged,) = [r for r in caplog.records if r.msg == MESSAGE]
    assert logged.getMessage() == (
        f"tasks/update of task {task_id} ignored input keys ['a', 'b']: the task is {ending}"
    )
    with pytest.raises(RpcError) as caught:  # a malformed update is refused all the same
        await update(client, task_id, {"a": 5})
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
    assert await update(client, task_id, {"zzz": {"action": "maybe"}}) == ACK
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
    assert await update(client, task_id, {"a": {"action": "maybe"}}) == ACK  # not checked
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


async def test_an_update_for_another_principals_task_is_the_unknown_task_error(
    env: tuple[Client, TasksExtension], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    client.client_info = {"name": "alice", "version": "1"}
    parked = await create(client, "ask", {"keys": ["a"]})
    finished = await ended(client, "completed")
    await trio.testing.wait_all_tasks_blocked()
    before = await get(client, parked)
    client.client_info = {"name": "mallory", "version": "1"}
    refusals = []
    for task_id in (parked, finished, "no-such-task"):
        with pytest.raises(RpcError) as caught:
            await update(client, task_id, {"a": answer("stolen")})
        refusals.append((caught.value.status, caught.value.code, caught.value.message))
        assert caught.value.data is None
    assert refusals == [(400, -32602, "Unknown or inaccessible taskId")] * 3
    assert ignored_keys(caplog) == []
    client.client_info = {"name": "alice", "version": "1"}
    assert await get(client, parked) == before
    assert tasks_of(client).runner.parked_count() == 1


async def test_undeclared_requests(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    task_id = await create(client, "sleepy", {"seconds": 0})
    for method in ("tasks/get", "tasks/cancel"):
        with pytest.raises(RpcError) as caught:
            await client.request(method, {"taskId": task_id}, capabilities={})
        assert (caught.value.code, caught.value.data, caught.value.status) == (-32021, MISSING, 400)
    with pytest.raises(RpcError) as caught:
        await client.call_tool("broken", {}, capabilities={})
    assert (caught.value.code, caught.value.data) == (-32021, MISSING)
    sync = await client.call_tool("sleepy", {"seconds": 0}, capabilities={})
    assert sync["resultType"] == "complete" and "taskId" not in sync


async def test_the_declaration_is_per_request(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    assert (await client.call_tool("sleepy", {"seconds": 0}))["resultType"] == "task"
    assert (await client.call_tool("sleepy", {"seconds": 0}, capabilities={}))[
        "resultType"
    ] == "complete"
    assert (await client.call_tool("sleepy", {"seconds": 0}))["resultType"] == "task"


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


async def test_task_ids_filter_needs_the_declaration(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    with pytest.raises(RpcError) as caught:
        await client.request(
            "subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, capabilities={}
        )
    assert (caught.value.code, caught.value.data, caught.value.status) == (-32021, MISSING, 400)
    with pytest.raises(RpcError) as caught:
        await client.request("subscriptions/listen", {"notifications": {"taskIds": [""]}})
    assert caught.value.code == -32602


async def test_scopes_are_isolated(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    task_id = await create(client, "sleepy")
    client.client_info = {"name": "mallory", "version": "1"}
    for method, params in (
        ("tasks/get", {}),
        ("tasks/cancel", {}),
        ("tasks/update", {"inputResponses": {}}),
    ):
        with pytest.raises(RpcError) as caught:
            await client.request(method, {"taskId": task_id, **params})
        assert (caught.value.code, caught.value.message) == (
            -32602,
            "Unknown or inaccessible taskId",
        )
    client.client_info = {"name": "presa-trio-testing", "version": "1"}
    assert (await get(client, task_id))["status"] == "working"


async def test_ttl_is_never_early_and_expired_tasks_are_unknown_then_reaped(
    world: World, clock: FakeClock
) -> None:
    server, ext = build(world, clock, ttl_ms=10_000)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "sleepy", {"seconds": 0})
        await settle(client, task_id)
        clock.now += 9.999
        assert (await get(client, task_id))["status"] == "completed"
        clock.now += 0.001
        with pytest.raises(RpcError) as caught:
            await get(client, task_id)
        assert caught.value.code == -32602
        assert await tasks_of(client).store.count() == 1
        assert await tasks_of(client).store.delete_expired(ext.now_ms()) == 1
        assert await tasks_of(client).store.count() == 0


async def test_capacity_limits(world: World, clock: FakeClock) -> None:
    server, _ext = build(
        world,
        clock,
        limits=TaskLimits(
            max_tasks=None, max_stored_per_principal=None, max_active_per_principal=2
        ),
    )
    async with open_client(server, capabilities=WITH_TASKS) as client:
        await create(client, "sleepy")
        await create(client, "sleepy")
        with pytest.raises(RpcError) as caught:
            await client.call_tool("sleepy", {})
        assert (caught.value.code, caught.value.status) == (-32603, 503)
        assert caught.value.data == {"retryable": True, "limit": "max_active_tasks_per_principal"}
        assert await tasks_of(client).store.count() == 2
        client.client_info = {"name": "other", "version": "1"}
        await create(client, "sleepy")


async def test_a_run_that_fills_the_byte_bound_refuses_the_next_creation(
    world: World, clock: FakeClock
) -> None:
    """``TaskLimits.max_stored_bytes``: the results held count, and so does what each running
    task may still add (its reserve, ``max_result_bytes``)."""
    limits = TaskLimits(
        max_tasks=None,
        max_stored_per_principal=None,
        max_active_per_principal=None,
        max_stored_bytes=4_000,
    )
    server, _ext = build(world, clock, limits=limits, max_result_bytes=1_000)
    full = {"retryable": True, "limit": "max_stored_bytes"}
    async with open_client(server, capabilities=WITH_TASKS) as client:
        store = tasks_of(client).store
        first = await create(client, "blob", {"size": 800})
        await settle(client, first)
        size = store.stored_bytes  # one result, as JSON
        assert 800 < size < 1_000
        fits = (4_000 - 1_000) // size + 1  # while the bytes held leave room for a reserve
        for _ in range(fits - 1):
            await settle(client, await create(client, "blob", {"size": 800}))
        assert store.stored_bytes == fits * size
        with pytest.raises(RpcError) as caught:
            await client.call_tool("blob", {"size": 1})
        assert (caught.value.code, caught.value.status, caught.value.data) == (-32603, 503, full)
        assert caught.value.message == "Task capacity exhausted"
        assert await store.count() == fits and tasks_of(client).runner.live_count == 0
        client.client_info = {"name": "other", "version": "1"}  # a bound for all principals
        with pytest.raises(RpcError) as caught:
            await client.call_tool("blob", {"size": 1})
        assert caught.value.data == full
        assert await store.delete_expired(10**15) == fits  # expired and reaped: room again
        assert store.stored_bytes == 0
        await create(client, "blob", {"size": 1})


async def test_running_tasks_hold_their_reserve_of_the_byte_bound(
    world: World, clock: FakeClock
) -> None:
    limits = TaskLimits(max_stored_per_principal=None, max_stored_bytes=4_000)
    server, _ext = build(world, clock, limits=limits, max_result_bytes=1_000)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        store = tasks_of(client).store
        parked = [await create(client, "ask", {"keys": ["k"]}) for _ in range(3)]
        await trio.testing.wait_all_tasks_blocked()
        assert 0 < store.stored_bytes < 1_000  # three questions, and three reserves of 1,000
        with pytest.raises(RpcError) as caught:
            await client.call_tool("blob", {"size": 1})
        assert caught.value.data == {"retryable": True, "limit": "max_stored_bytes"}
        await update(client, parked[0], {"k": answer("v")})
        assert (await settle(client, parked[0]))["status"] == "completed"  # its reserve is free
        await settle(client, await create(client, "blob", {"size": 1}))


class HangingStore:
    """A memory store whose calls named in ``hang`` do not return for an hour (a store that
    hangs: longer than any bound, and short enough that a runner without its bounds fails
    these tests instead of hanging them, shielded as its store calls are).

    With ``after_effect``, a hung ``create`` hangs after it stored the record, and the hang
    can be cancelled: a store that breaks the all-or-nothing contract. With ``late``, it
    stores and then takes 10 s, uncancellably: a store that keeps the contract, slowly.
    """

    def __init__(self) -> None:
        self.inner = MemoryTaskStore()
        self.hang: set[str] = set()
        self.after_effect = False
        self.late = False

    async def _wait(self, call: str) -> None:
        if call in self.hang:
            await trio.sleep(3_600)
        await trio.lowlevel.checkpoint()

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        if self.late:
            with trio.CancelScope(shield=True):
                await self.inner.create(task, limits)
                await trio.sleep(2 * COMMIT_SECONDS)
            return
        if not self.after_effect:
            await self._wait("create")
        await self.inner.create(task, limits)
        if self.after_effect:
            await self._wait("create")

    async def get(self, task_id: str) -> TaskRecord | None:
        await self._wait("get")
        return await self.inner.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        await self._wait("compare_and_set")
        return await self.inner.compare_and_set(task, expected_revision)

    async def delete_expired(self, now_ms: int) -> int:
        return await self.inner.delete_expired(now_ms)

    async def count(self) -> int:
        return await self.inner.count()


STORE_TIMED_OUT = (-32603, 503, {"retryable": True})
#: The longest until the runner offers a held-back outcome again once the store answers (an
#: offer already waiting on the hung store runs out its bound first).
OFFERED_AGAIN = RESETTLE_SECONDS + COMMIT_SECONDS


def refusal(caught: pytest.ExceptionInfo[RpcError]) -> tuple[int, int, Any]:
    return (caught.value.code, caught.value.status, caught.value.data)


@pytest.fixture
def hanging() -> HangingStore:
    return HangingStore()


@pytest.fixture
async def on_hanging(
    world: World, clock: FakeClock, hanging: HangingStore
) -> AsyncIterator[Client]:
    server, _ = build(world, clock, store=hanging)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        yield client


async def test_a_creation_the_store_never_answers_is_retryable_and_leaves_nothing(
    on_hanging: Client,
    hanging: HangingStore,
    world: World,
    autojump_clock: trio.testing.MockClock,
) -> None:
    client, runner = on_hanging, tasks_of(on_hanging).runner
    hanging.hang.add("create")
    start = trio.current_time()
    with pytest.raises(RpcError) as caught:
        await client.call_tool("sleepy", {"seconds": 0})
    assert refusal(caught) == STORE_TIMED_OUT
    assert trio.current_time() - start == COMMIT_SECONDS  # the bound, not forever
    assert (runner.live_count, await hanging.count()) == (0, 0)
    assert not world.entered.is_set()  # no work started
    hanging.hang.clear()
    await trio.sleep(OFFERED_AGAIN)  # the runner makes sure no record was left working
    assert (runner.unsettled_count, await hanging.count()) == (0, 0)
    assert (await settle(client, await create(client, "sleepy", {"seconds": 0})))[
        "status"
    ] == "completed"


async def test_a_creation_stored_before_the_store_hung_fails_that_record(
    on_hanging: Client,
    hanging: HangingStore,
    world: World,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The bound fired after a store that breaks the contract stored the record: the client
    is told to retry, no work runs for it, and the record is failed, not left working."""
    client, runner = on_hanging, tasks_of(on_hanging).runner
    hanging.hang.add("create")
    hanging.after_effect = True
    with pytest.raises(RpcError) as caught:
        await client.call_tool("sleepy", {"seconds": 0})
    assert refusal(caught) == STORE_TIMED_OUT
    (orphan,) = hanging.inner._tasks.values()  # stored, and no work behind it
    assert runner.live_count == 0 and not world.entered.is_set()
    hanging.hang.clear()
    await trio.sleep(OFFERED_AGAIN)  # by then the runner has failed the record
    failed = await hanging.get(orphan.task_id)
    assert failed is not None and failed.status is Status.FAILED
    assert failed.error == {"code": -32603, "message": "The server could not start this task"}
    assert runner.unsettled_count == 0


async def test_a_creation_the_store_completes_late_runs_its_task(
    on_hanging: Client,
    hanging: HangingStore,
    world: World,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A store that keeps the contract finishes a write it made: past the bound, the
    record and its work both exist, and the client gets its task."""
    client, runner = on_hanging, tasks_of(on_hanging).runner
    hanging.late = True
    task_id = await create(client, "sleepy", {"seconds": 0})
    assert (await settle(client, task_id))["status"] == "completed"
    assert world.entered.is_set() and runner.live_count == 0
    assert await hanging.count() == 1


async def test_an_update_the_store_never_answers_is_retryable_and_accepts_nothing(
    on_hanging: Client, hanging: HangingStore, autojump_clock: trio.testing.MockClock
) -> None:
    client, runner = on_hanging, tasks_of(on_hanging).runner
    task_id = await create(client, "ask", {"keys": ["a"]})
    await trio.testing.wait_all_tasks_blocked()
    hanging.hang.add("compare_and_set")
    with pytest.raises(RpcError) as caught:
        await update(client, task_id, {"a": answer("1")})
    assert refusal(caught) == STORE_TIMED_OUT
    assert (runner.live_count, runner.parked_count()) == (1, 1)  # still waiting for "a"
    hanging.hang.clear()
    assert list((await get(client, task_id))["inputRequests"]) == ["a"]
    assert await update(client, task_id, {"a": answer("1")}) == ACK  # the retry delivers
    assert (await settle(client, task_id))["result"]["content"][0]["text"] == "1"
    assert (runner.live_count, await hanging.count()) == (0, 1)


async def test_a_cancel_the_store_never_records_is_retryable_and_recorded_later(
    on_hanging: Client,
    hanging: HangingStore,
    world: World,
    autojump_clock: trio.testing.MockClock,
) -> None:
    client, runner = on_hanging, tasks_of(on_hanging).runner
    task_id = await create(client, "sleepy")
    await world.entered.wait()
    hanging.hang.add("compare_and_set")
    with pytest.raises(RpcError) as caught:
        await client.request("tasks/cancel", {"taskId": task_id})
    assert refusal(caught) == STORE_TIMED_OUT
    assert world.log == ["finally"]  # the task was cancelled; its record is not yet
    assert (runner.live_count, runner.unsettled_count) == (0, 1)
    hanging.hang.clear()
    await trio.sleep(OFFERED_AGAIN)
    assert (await get(client, task_id))["status"] == "cancelled"
    assert runner.unsettled_count == 0


async def test_input_size_limit(world: World, clock: FakeClock) -> None:
    server, _ext = build(world, clock, max_input_bytes=100)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        with pytest.raises(RpcError) as caught:  # a task it must be, and it cannot be one
            await client.call_tool("only_as_task", {"text": "k" * 200})
        assert (caught.value.code, caught.value.status) == (-32602, 400)
        # Declaring Tasks does not require a task: an optional tool runs synchronously.
        answered = await client.call_tool("ask", {"keys": ["k" * 200]})
        assert answered["resultType"] == "input_required"  # the plain MRTR path
        assert await tasks_of(client).store.count() == 0
        assert (await client.call_tool("only_as_task", {"text": "ok"}))["resultType"] == "task"


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


async def test_shutdown_stops_running_tasks(world: World, clock: FakeClock) -> None:
    store = MemoryTaskStore()  # outlives the run, so the record can be read afterwards
    server, _ = build(world, clock, store=store)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "sleepy")
        await world.entered.wait()
    assert world.log == ["finally"]
    record = await store.get(task_id)
    assert record is not None and record.status == "failed"  # stopped, not a client's cancel
    assert record.error == {
        "code": -32603,
        "message": "The server stopped before the task finished",
    }


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


async def test_the_reaper_deletes_expired_tasks(
    world: World, clock: FakeClock, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0
    server, _ext = build(world, clock, ttl_ms=10_000, reap_interval=60)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "sleepy", {"seconds": 0})
        await settle(client, task_id)
        await trio.sleep(61)  # a reaper pass: nothing has expired yet
        assert await tasks_of(client).store.count() == 1
        clock.now += 10  # createdAt + ttlMs has passed: unknown to requests at once...
        with pytest.raises(RpcError):
            await get(client, task_id)
        await trio.sleep(60)  # ...but kept through the reaper's grace, for a runner to finish
        assert await tasks_of(client).store.count() == 1
        clock.now += 10  # past the grace: the next pass deletes it
        await trio.sleep(60)
        assert await tasks_of(client).store.count() == 0


async def test_a_running_task_that_expires_is_announced_even_with_a_fast_reaper(
    world: World, clock: FakeClock, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0
    server, _ext = build(world, clock, ttl_ms=2_000, reap_interval=0.001)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "sleepy")
        async with client.listen({"taskIds": [task_id]}) as stream:
            await stream.next()  # the acknowledgement
            for _ in range(3):  # trio's deadline and the wall clock move together
                clock.now += 1
                await trio.sleep(1)
            with trio.fail_after(30):  # the mock clock jumps: a missing notice fails, fast
                note = await stream.next()
        assert note["method"] == "notifications/tasks"
        assert note["params"]["status"] == "failed"
        assert note["params"]["error"] == {
            "code": -32603,
            "message": "Task expired before it finished",
        }


async def test_extension_settings_are_negotiated_per_request(
    env: tuple[Client, TasksExtension],
) -> None:
    client, _ = env
    client.validate = False  # the capability value is deliberately not an object
    caps = {"extensions": {EXTENSION_ID: "yes please"}}
    with pytest.raises(RpcError) as caught:
        await client.request("tools/list", capabilities=caps)
    assert (caught.value.code, caught.value.status) == (-32602, 400)
    future = {"extensions": {EXTENSION_ID: {"someFutureSetting": True}}}
    assert (await client.call_tool("sleepy", {"seconds": 0}, capabilities=future))[
        "resultType"
    ] == "task"


async def test_scope_defaults_to_the_servers_principal(world: World, clock: FakeClock) -> None:
    server = Server("p", principal=_principal)
    ext = TasksExtension(clock=clock)
    server.add_extension(ext)

    @server.tool(options={"tasks": "optional"})
    async def wait() -> str:
        """Waits."""
        await trio.sleep(3600)
        return "never"

    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "wait")
        client.client_info = {"name": "eve", "version": "1"}
        with pytest.raises(RpcError):
            await get(client, task_id)
        client.client_info = {"name": "presa-trio-testing", "version": "1"}
        assert (await get(client, task_id))["status"] == "working"
        await client.request("tasks/cancel", {"taskId": task_id})
