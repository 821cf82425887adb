"""What a tool returns that the wire cannot carry: a result that is not JSON is an internal error,
and output that breaks the tool's output schema is a tool error (also as a task)."""

from __future__ import annotations

import logging
from typing import Any, TypedDict

import pytest
import trio
import trio.testing
from support.answers import errors_logged, nan_server, only_error
from support.task_service import WITH_TASKS

from presa_trio import Context, Server, Validation
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import open_client


@pytest.mark.parametrize("tool", ["not_json", "lone_surrogate", "opaque"])
async def test_a_result_that_is_not_json_is_an_internal_error(
    tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_client(nan_server(), capabilities={}) as client:
        message = client.message("tools/call", {"name": tool, "arguments": {}})
        result = await client.send(message)
        error = only_error(result)
        assert error == {"code": -32603, "message": "Internal error"}
        assert result.messages[0]["id"] == message["id"]
        assert result.status == 500, "a -32603 decided before streaming is HTTP 500"
    # One line saying what happened, not a traceback from inside the JSON writer.
    (logged,) = errors_logged(caplog)
    assert logged.getMessage().startswith("the tools/call result is not JSON and was dropped")
    assert logged.exc_info is None


class Point(TypedDict):
    x: int
    y: int


async def test_output_that_breaks_the_output_schema_is_a_tool_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server("out", "1", validation=Validation(outbound=True), loop_warning=None)

    @server.tool()
    async def point(good: bool) -> Point:
        """A point, or something that is not one."""
        await trio.lowlevel.checkpoint()
        if good:
            return {"x": 1, "y": 2}
        return {"x": "one"}  # type: ignore[typeddict-item]

    async with open_client(server, capabilities={}) as client:
        (tool,) = await client.list_tools()
        assert tool["outputSchema"]["required"] == ["x", "y"]
        ok = await client.call_tool("point", {"good": True})
        assert ok["structuredContent"] == {"x": 1, "y": 2}
        bad = await client.call_tool("point", {"good": False})
        assert client.last.status == 200
        assert bad["resultType"] == "complete"
        assert bad["isError"] is True
        assert bad["content"] == [
            {
                "type": "text",
                "text": "Tool point returned output that does not match its outputSchema",
            }
        ]
        assert "structuredContent" not in bad
    logged = [r.getMessage() for r in errors_logged(caplog)]
    assert len(logged) == 1
    assert "point" in logged[0] and "outputSchema" in logged[0]


OUTPUT = {
    "type": "object",
    "properties": {"count": {"type": "integer"}},
    "required": ["count"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("wrong", "where"),
    [({"count": "many"}, "count"), ({}, "(root)"), ("oops", "(root)"), ([1], "(root)")],
)
async def test_output_that_breaks_the_schema_is_a_tool_error(
    wrong: Any, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    server = Server("shapes", "1", validation=Validation(outbound=True))
    server.add_extension(TasksExtension())

    @server.tool(output_schema=OUTPUT, options={"tasks": "optional"})
    async def miscount(ctx: Context) -> Any:
        """Returns the wrong shape."""
        await trio.lowlevel.checkpoint()
        return wrong

    @server.tool(output_schema=OUTPUT)
    async def counts() -> dict[str, int]:
        """Returns the right shape."""
        await trio.lowlevel.checkpoint()
        return {"count": 3}

    expected = {
        "resultType": "complete",
        "content": [
            {
                "type": "text",
                "text": "Tool miscount returned output that does not match its outputSchema",
            }
        ],
        "isError": True,
    }
    async with open_client(server, capabilities=WITH_TASKS) as client:
        result = await client.send(
            client.message("tools/call", {"name": "miscount"}, capabilities={})
        )
        assert result.status == 200 and result.response is not None
        assert result.response["result"] == {
            **expected,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "shapes", "version": "1"}},
        }
        assert b"many" not in result.body and b"oops" not in result.body
        (record,) = caplog.records
        assert record.levelno == logging.ERROR and record.exc_info is None
        assert record.getMessage().startswith(f"tool miscount broke its outputSchema at {where}:")

        good = await client.call_tool("counts")
        assert good["structuredContent"] == {"count": 3} and "isError" not in good

        task_id = await client.create_task("miscount")
        with trio.fail_after(5):
            task = await client.wait_task(task_id)
        assert task["status"] == "completed" and task["result"] == expected
        assert len(caplog.records) == 2  # once more, for the task's own call
