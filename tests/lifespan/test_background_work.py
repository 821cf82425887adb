"""Background work a tool starts (``ctx.start_background``): it runs after the tool answered, from
sync tools too, a failure is logged and stops nothing, it is bounded (the loop watcher holds one
of the slots unless it is switched off), and the end of the run cancels it."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from support.answers import errors_logged, only_error

from presa_trio import Context, Limits, Server, Validation
from presa_trio.testing import RpcError, open_client


class Background:
    def __init__(self) -> None:
        self.release = trio.Event()
        self.ran = trio.Event()
        self.cleaned = trio.Event()
        self.log: list[str] = []


def background_server(world: Background, **options: Any) -> Server:
    server = Server("bg", "1", validation=Validation(outbound=True), **options)

    async def work(tag: str) -> None:
        await world.release.wait()
        world.log.append(f"ran {tag}")
        world.ran.set()

    async def boom() -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("background went wrong")

    async def forever() -> None:
        try:
            await trio.sleep_forever()
        finally:
            world.cleaned.set()

    @server.tool()
    async def kick(ctx: Context, tag: str) -> str:
        """Starts work that waits for the test."""
        ctx.start_background(work, tag, name="work")
        world.log.append(f"answered {tag}")
        return "started"

    @server.tool()
    def kick_sync(ctx: Context, tag: str) -> str:
        """The same from a worker thread."""
        ctx.start_background(work, tag)
        return "started from a thread"

    @server.tool()
    async def explode(ctx: Context) -> str:
        """Starts work that fails."""
        ctx.start_background(boom, name="boom")
        return "started"

    @server.tool()
    async def hold(ctx: Context) -> str:
        """Starts work that runs until the run ends."""
        ctx.start_background(forever, name="forever")
        return "holding"

    return server


async def test_background_work_runs_after_the_tool_answered() -> None:
    world = Background()
    async with open_client(background_server(world, loop_warning=None), capabilities={}) as c:
        result = await c.call_tool("kick", {"tag": "a"})
        assert result["content"] == [{"type": "text", "text": "started"}]
        runtime = c.app.runtime
        assert runtime is not None
        assert runtime.background_count == 1  # still pending after the response was read
        assert world.log == ["answered a"]
        world.release.set()
        with trio.fail_after(5):
            await world.ran.wait()
        assert world.log == ["answered a", "ran a"]
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.background_count == 0


async def test_background_work_from_a_sync_tool() -> None:
    world = Background()
    world.release.set()
    async with open_client(background_server(world, loop_warning=None), capabilities={}) as c:
        result = await c.call_tool("kick_sync", {"tag": "t"})
        assert result["content"] == [{"type": "text", "text": "started from a thread"}]
        with trio.fail_after(5):
            await world.ran.wait()
        assert world.log == ["ran t"]


async def test_a_failing_background_task_is_logged_and_stops_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = Background()
    async with open_client(background_server(world, loop_warning=None), capabilities={}) as c:
        await c.call_tool("explode", {})
        runtime = c.app.runtime
        assert runtime is not None
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.background_count == 0
        failures = [r for r in errors_logged(caplog) if "background task" in r.getMessage()]
        assert [r.getMessage() for r in failures] == ["background task boom failed"]
        assert failures[0].exc_info is not None
        assert "background went wrong" in caplog.text
        world.release.set()
        assert (await c.call_tool("kick", {"tag": "next"}))["content"][0]["text"] == "started"
        with trio.fail_after(5):
            await world.ran.wait()
        assert c.app.runtime is runtime  # the run goes on


async def test_background_work_is_bounded() -> None:
    world = Background()
    # max_background=2, and the loop watcher (on by default) holds one of the slots.
    async with open_client(
        background_server(world, limits=Limits(max_background=2)), capabilities={}
    ) as c:
        runtime = c.app.runtime
        assert runtime is not None
        assert runtime.background_count == 1
        assert (await c.call_tool("kick", {"tag": "1"}))["content"][0]["text"] == "started"
        message = c.message("tools/call", {"name": "kick", "arguments": {"tag": "2"}})
        result = await c.send(message)
        assert result.status == 503
        error = only_error(result)
        assert error["code"] == -32603
        assert error["data"] == {"retryable": True, "limit": "max_background_tasks"}
        assert world.log == ["answered 1"]  # the refused call never got past its start
        world.release.set()
        with trio.fail_after(5):
            await world.ran.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.background_count == 1  # the slot is free again
        assert (await c.call_tool("kick", {"tag": "3"}))["content"][0]["text"] == "started"


async def test_background_work_without_the_watcher_has_every_slot() -> None:
    world = Background()
    server = background_server(world, limits=Limits(max_background=2), loop_warning=None)
    async with open_client(server, capabilities={}) as c:
        await c.call_tool("kick", {"tag": "1"})
        await c.call_tool("kick", {"tag": "2"})
        with pytest.raises(RpcError) as caught:
            await c.call_tool("kick", {"tag": "3"})
        assert caught.value.status == 503
        assert caught.value.data["limit"] == "max_background_tasks"
        world.release.set()


async def test_background_work_is_cancelled_when_the_run_ends() -> None:
    world = Background()
    async with open_client(background_server(world, loop_warning=None), capabilities={}) as c:
        await c.call_tool("hold", {})
        await trio.testing.wait_all_tasks_blocked()
        assert not world.cleaned.is_set()
    assert world.cleaned.is_set()
