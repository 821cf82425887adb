"""A tasks server the test controls: its tools, a world that records what they did, a clock
moved by hand; and helpers to create, read, settle and update its tasks."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from presa_trio import Context, InternalError, Server, ToolError, Validation
from presa_trio.ext.tasks import TasksExtension
from presa_trio.mrtr import elicit
from presa_trio.testing import Client


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

    @server.tool(options={"tasks": "optional"}, structured_output=False)  # its size is its text
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


def answer(value: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"v": value}}


async def update(client: Client, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    return await client.request("tasks/update", {"taskId": task_id, "inputResponses": responses})


async def update_unchecked(client: Client, task_id: str, responses: object) -> dict[str, Any]:
    """A ``tasks/update`` the client does not schema-check: for the tests that send the
    server answers the extension's schema forbids, on purpose."""
    client.validate = False
    try:
        return await client.request(
            "tasks/update", {"taskId": task_id, "inputResponses": responses}
        )
    finally:
        client.validate = True


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
