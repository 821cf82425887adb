"""``InputRequired`` is a control-flow signal, not an error: a tool's ``except Exception``
cannot swallow it, the same tool source runs as an MRTR request and as a task, and a signal
that escapes from a child task is a bug answered -32603 without stopping the server."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from presa_trio import Context, Server
from presa_trio.ext.tasks import EXTENSION_ID, TasksExtension
from presa_trio.mrtr import elicit
from presa_trio.testing import RpcError, open_client

ELICITATION = {"elicitation": {}}
WITH_TASKS = {"elicitation": {}, "extensions": {EXTENSION_ID: {}}}
NAME_REQUEST = elicit("Name?", {"name": {"type": "string"}}, ["name"])
ALICE = {"action": "accept", "content": {"name": "Alice"}}


def signal_server() -> Server:
    server = Server("signal", "1")
    server.add_extension(TasksExtension())

    @server.tool(options={"tasks": "optional"})
    async def swallow(ctx: Context) -> str:
        """Wraps the input request in a catch-all for ordinary errors."""
        try:
            answers = await ctx.input({"name": NAME_REQUEST})
        except Exception:
            return "swallowed"
        return f"Hello, {answers['name']['content']['name']}!"

    @server.tool()
    async def from_a_child(ctx: Context) -> str:
        """Asks for input from a child task of its own nursery (a bug)."""

        async def child() -> None:
            await ctx.input({"name": NAME_REQUEST})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
        return "unreachable"

    @server.tool()
    async def ok() -> str:
        """Always fine."""
        await trio.lowlevel.checkpoint()
        return "ok"

    return server


def text_of(result: dict[str, Any]) -> str:
    assert result["resultType"] == "complete" and len(result["content"]) == 1
    text: str = result["content"][0]["text"]
    return text


async def test_except_exception_does_not_swallow_the_signal() -> None:
    async with open_client(signal_server(), capabilities=ELICITATION) as client:
        first = await client.call_tool("swallow")
        assert first["resultType"] == "input_required"  # not a "swallowed" complete result
        assert first["inputRequests"] == {"name": NAME_REQUEST}
        assert isinstance(first["requestState"], str) and first["requestState"]
        assert "content" not in first

        done = await client.call_tool(
            "swallow",
            input_responses={"name": ALICE},
            request_state=first["requestState"],
        )
        assert text_of(done) == "Hello, Alice!"


async def test_the_same_tool_runs_as_mrtr_and_as_a_task() -> None:
    async with open_client(signal_server(), capabilities=ELICITATION) as client:
        with trio.fail_after(10):
            # As a plain request (the client does not declare tasks): MRTR rounds.
            first = await client.call_tool("swallow")
            assert first["resultType"] == "input_required"
            assert first["inputRequests"] == {"name": NAME_REQUEST}
            done = await client.call_tool("swallow", answer=lambda key, request: ALICE)
            assert text_of(done) == "Hello, Alice!"

            # As a task: it parks in ctx.input until tasks/update answers.
            client.capabilities = dict(WITH_TASKS)
            task_id = await client.create_task("swallow")
            parked = await client.wait_task(task_id, ("input_required",))
            assert parked["status"] == "input_required"
            assert parked["inputRequests"] == {"name": NAME_REQUEST}
            ack = await client.update_task(task_id, {"name": ALICE})
            assert ack["resultType"] == "complete"
            finished = await client.wait_task(task_id)
            assert finished["status"] == "completed"
            assert finished["result"] == {
                "resultType": "complete",
                "content": [{"type": "text", "text": "Hello, Alice!"}],
                "structuredContent": {"result": "Hello, Alice!"},
            }


async def test_input_required_from_a_child_task_is_an_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_client(signal_server(), capabilities=ELICITATION) as client:
        with (
            caplog.at_level(logging.ERROR, logger="presa_trio"),
            pytest.raises(RpcError) as caught,
        ):
            await client.call_tool("from_a_child")
        error = caught.value
        assert (error.code, error.status, error.message, error.data) == (
            -32603,
            500,
            "Internal error",
            None,
        )
        assert [r.getMessage() for r in caplog.records] == ["handling tools/call failed"]

        # The server keeps serving, MRTR included.
        assert text_of(await client.call_tool("ok")) == "ok"
        again = await client.call_tool("swallow")
        assert again["resultType"] == "input_required"
        with pytest.raises(RpcError) as twice:
            await client.call_tool("from_a_child")
        assert (twice.value.code, twice.value.status) == (-32603, 500)
