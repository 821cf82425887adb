"""Core methods through the ASGI app: shapes, order, caching hints, tools, resources, prompts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import pytest
import trio

from fixtures.conformance import WAV
from presa_trio import (
    Context,
    InvalidParams,
    Listing,
    Server,
    ToolError,
    ToolResult,
    Validation,
)
from presa_trio.testing import Client, RpcError, drive, open_client

SERVER_INFO = {"name": "presa-trio-conformance-fixture", "version": "0.1.0"}


async def test_discover(client: Client) -> None:
    result = await client.discover()
    assert result == {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "completions": {},
            "logging": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        },
        "instructions": "presa_trio's conformance fixture.",
        "ttlMs": 60000,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
    }


async def test_tools_are_sorted_stable_and_described(client: Client) -> None:
    first = await client.list_tools()
    names = [t["name"] for t in first]
    assert names == sorted(names)
    assert names[0] == "a_header_probe"
    assert all(t["description"] and t["inputSchema"]["type"] == "object" for t in first)
    assert await client.list_tools() == first
    assert client.last.response is not None
    result = client.last.response["result"]
    assert (result["ttlMs"], result["cacheScope"]) == (60000, "public")


async def test_json_schema_2020_12_survives_verbatim(client: Client) -> None:
    from fixtures.conformance import JSON_SCHEMA_2020_12

    tools = {t["name"]: t for t in await client.list_tools()}
    assert tools["json_schema_2020_12_tool"]["inputSchema"] == JSON_SCHEMA_2020_12


@pytest.mark.parametrize(
    ("tool", "content"),
    [
        (
            "test_simple_text",
            [{"type": "text", "text": "This is a simple text response for testing."}],
        ),
        (
            "test_audio_content",
            [
                {
                    "type": "audio",
                    "data": WAV,
                    "mimeType": "audio/wav",
                }
            ],
        ),
    ],
)
async def test_call_tool_content(client: Client, tool: str, content: list[dict[str, Any]]) -> None:
    result = await client.call_tool(tool)
    assert result == {
        "resultType": "complete",
        "content": content,
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
    }


async def test_tool_error_is_a_result(client: Client) -> None:
    result = await client.call_tool("test_error_handling", {})
    assert result["isError"] is True
    assert result["content"] == [
        {"type": "text", "text": "This tool intentionally returns an error for testing"}
    ]


async def test_progress_turns_the_response_into_sse(client: Client) -> None:
    message = client.message(
        "tools/call", {"name": "test_tool_with_progress"}, meta={"progressToken": "p-1"}
    )
    with trio.fail_after(10):
        result = await client.send(message)
    assert result.headers["content-type"] == "text/event-stream"
    assert result.headers["cache-control"] == "no-cache"
    progress = [n["params"] for n in result.notifications]
    assert progress == [
        {"progressToken": "p-1", "progress": 0, "total": 100},
        {"progressToken": "p-1", "progress": 50, "total": 100},
        {"progressToken": "p-1", "progress": 100, "total": 100},
    ]
    assert result.messages[-1]["id"] == message["id"]
    assert result.messages[-1]["result"]["content"][0]["text"] == "p-1"
    # One compact line per event, no id: lines (streams are not resumable).
    assert b"id:" not in result.body
    assert all(line.startswith((b"event:", b"data:")) for line in result.body.splitlines() if line)


async def test_without_progress_token_the_answer_is_json(client: Client) -> None:
    result = await client.send(client.message("tools/call", {"name": "test_tool_with_progress"}))
    assert result.headers["content-type"] == "application/json"
    assert result.notifications == []


async def test_logging_needs_opt_in(client: Client) -> None:
    quiet = await client.send(client.message("tools/call", {"name": "test_logging_tool"}))
    assert quiet.notifications == [] and quiet.headers["content-type"] == "application/json"


async def test_missing_capability(client: Client) -> None:
    with pytest.raises(RpcError) as caught:
        await client.call_tool("test_missing_capability", {}, capabilities={})
    assert (caught.value.code, caught.value.status) == (-32021, 400)
    assert caught.value.data == {"requiredCapabilities": {"sampling": {}}}
    ok = await client.call_tool("test_missing_capability", {}, capabilities={"sampling": {}})
    assert ok["content"] == [{"type": "text", "text": "Success"}]


async def test_capabilities_are_never_remembered(client: Client) -> None:
    await client.call_tool("test_missing_capability", {}, capabilities={"sampling": {}})
    with pytest.raises(RpcError):
        await client.call_tool("test_missing_capability", {}, capabilities={})


async def test_resources(client: Client) -> None:
    listed = await client.request("resources/list")
    assert [r["uri"] for r in listed["resources"]] == [
        "test://static-text",
        "test://static-binary",
        "test://watched-resource",
    ]
    text = await client.read_resource("test://static-text")
    assert text["contents"] == [
        {
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]
    assert (text["ttlMs"], text["cacheScope"]) == (60000, "public")
    templated = await client.read_resource("test://template/123/data")
    assert json.loads(templated["contents"][0]["text"])["id"] == "123"
    templates = await client.request("resources/templates/list")
    assert templates["resourceTemplates"][0]["uriTemplate"] == "test://template/{id}/data"


async def test_resource_not_found(client: Client) -> None:
    uri = "test://nonexistent-resource-for-conformance-testing"
    with pytest.raises(RpcError) as caught:
        await client.read_resource(uri)
    assert (caught.value.code, caught.value.data, caught.value.status) == (
        -32602,
        {"uri": uri},
        400,
    )


async def test_prompts(client: Client) -> None:
    listed = await client.request("prompts/list")
    assert [p["name"] for p in listed["prompts"]][:2] == [
        "test_simple_prompt",
        "test_prompt_with_arguments",
    ]
    assert listed["prompts"][1]["arguments"] == [
        {"name": "arg1", "required": True},
        {"name": "arg2", "required": True},
    ]
    got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
    assert got["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "Prompt with arguments: arg1='a', arg2='b'"},
        }
    ]
    with pytest.raises(RpcError) as caught:
        await client.get_prompt("test_prompt_with_arguments", {"arg1": "a"})
    assert caught.value.code == -32602
    with pytest.raises(RpcError) as caught:
        await client.get_prompt("nope")
    assert caught.value.code == -32602


async def test_completion(client: Client) -> None:
    result = await client.request(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "test"},
        },
    )
    assert result["completion"] == {
        "values": ["test", "testing", "tested", "tester"],
        "total": 4,
        "hasMore": False,
    }
    with pytest.raises(RpcError) as caught:
        await client.request(
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "nope"},
                "argument": {"name": "a", "value": ""},
            },
        )
    assert caught.value.code == -32602


# ---------------------------------------------------------------------- a user's own server


class Point(TypedDict):
    x: int
    y: int


@dataclass
class Reading:
    celsius: float
    station: str


def build_user_server() -> Server:
    server = Server(
        "user", "1.0", validation=Validation(outbound=True), listing=Listing(page_size=2)
    )

    @server.tool()
    async def add(a: int, b: int = 2) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def point(x: int, y: int) -> Point:
        """Make a point."""
        return {"x": x, "y": y}

    @server.tool()
    def reading(station: Literal["north", "south"]) -> Reading:
        """A weather reading."""
        return Reading(21.5, station)

    @server.tool()
    def explode() -> str:
        """Fails unexpectedly."""
        raise RuntimeError("secret internal detail")

    @server.tool()
    def refuse(ctx: Context) -> str:
        """Fails as a protocol error."""
        raise InvalidParams("refused")

    @server.tool()
    def custom() -> ToolResult:
        """Full control over the result."""
        return ToolResult(content=[{"type": "text", "text": "x"}], structured=[1, 2], is_error=True)

    @server.tool()
    def oops() -> str:
        """A tool error."""
        raise ToolError("bad input, try again")

    return server


@pytest.fixture
async def user() -> Any:
    async with open_client(build_user_server()) as c:
        yield c


async def all_tools(user: Client) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor = None
    while True:
        result = await user.request("tools/list", {"cursor": cursor} if cursor else None)
        tools += result["tools"]
        cursor = result.get("nextCursor")
        if cursor is None:
            return tools
        assert len(result["tools"]) == 2


async def test_type_hint_schemas(user: Client) -> None:
    tools = {t["name"]: t for t in await all_tools(user)}
    assert tools["add"]["inputSchema"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert tools["add"]["description"] == "Add two integers."
    assert tools["point"]["outputSchema"]["properties"] == {
        "x": {"title": "X", "type": "integer"},
        "y": {"title": "Y", "type": "integer"},
    }


async def test_pagination(user: Client) -> None:
    names = [t["name"] for t in await all_tools(user)]
    assert names == sorted(["add", "point", "reading", "explode", "refuse", "custom", "oops"])
    with pytest.raises(RpcError) as caught:
        await user.request("tools/list", {"cursor": "garbage!"})
    assert caught.value.code == -32602


async def test_structured_output(user: Client) -> None:
    result = await user.call_tool("point", {"x": 1, "y": 2})
    assert result["structuredContent"] == {"x": 1, "y": 2}
    assert json.loads(result["content"][0]["text"]) == {"x": 1, "y": 2}
    reading = await user.call_tool("reading", {"station": "north"})
    assert reading["structuredContent"] == {"celsius": 21.5, "station": "north"}


async def test_invalid_arguments_are_tool_errors(user: Client) -> None:
    result = await user.call_tool("add", {"a": "one"})
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Invalid arguments: a:")
    result = await user.call_tool("reading", {"station": "east"})
    assert result["isError"] is True


async def test_absent_arguments_are_empty(user: Client) -> None:
    result = await user.call_tool("add")
    assert result["isError"] is True  # "a" is required; the call itself was well-formed


async def test_unexpected_exception_is_internal_error_without_detail(user: Client) -> None:
    result = await drive(
        user.app,
        json.dumps(user.message("tools/call", {"name": "explode"})),
        user.headers_for(user.message("tools/call", {"name": "explode"})),
    )
    assert result.status == 500
    assert result.response is not None
    assert result.response["error"] == {"code": -32603, "message": "Internal error"}
    assert b"secret" not in result.body and b"Traceback" not in result.body


async def test_protocol_error_from_a_tool(user: Client) -> None:
    with pytest.raises(RpcError) as caught:
        await user.call_tool("refuse")
    assert (caught.value.code, caught.value.status) == (-32602, 400)


async def test_tool_result_and_tool_error(user: Client) -> None:
    result = await user.call_tool("custom")
    assert result["structuredContent"] == [1, 2] and result["isError"] is True
    result = await user.call_tool("oops")
    assert result == {
        "resultType": "complete",
        "isError": True,
        "content": [{"type": "text", "text": "bad input, try again"}],
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "user", "version": "1.0"}},
    }


async def test_unadvertised_methods_are_not_found(user: Client) -> None:
    assert "prompts" not in (await user.discover())["capabilities"]
    for method in ("prompts/list", "resources/list", "completion/complete"):
        with pytest.raises(RpcError) as caught:
            await user.request(
                method,
                {
                    "ref": {"type": "ref/prompt", "name": "x"},
                    "argument": {"name": "a", "value": "b"},
                }
                if method.startswith("completion")
                else None,
            )
        assert (caught.value.code, caught.value.status) == (-32601, 404)


async def test_progress_that_does_not_increase_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    server = Server("p", validation=Validation(outbound=True))

    @server.tool()
    async def wobbly(ctx: Context) -> str:
        """Reports progress badly."""
        for value in (1, 3, 3, 2, 4):
            await ctx.progress(value)
        return "done"

    async with open_client(server) as client:
        message = client.message("tools/call", {"name": "wobbly"}, meta={"progressToken": 1})
        result = await client.send(message)
    assert [n["params"]["progress"] for n in result.notifications] == [1, 3, 4]
    assert result.response is not None and result.response["result"]["content"][0]["text"] == "done"
    assert "must increase" in caplog.text


async def test_context_is_found_even_when_hints_do_not_resolve() -> None:
    server = Server("hints")

    @server.tool(input_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    def odd(ctx: Context, n: Unresolvable) -> str:  # type: ignore[name-defined]  # noqa: F821
        """Annotations that typing cannot resolve."""
        return f"{ctx.method} {n}"

    async with open_client(server) as client:
        result = await client.call_tool("odd", {"n": 3})
    assert result["content"] == [{"type": "text", "text": "tools/call 3"}]
