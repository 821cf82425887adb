"""Each return hint's ``outputSchema`` and ``structuredContent``, exactly: pydantic's schema,
an object as it is, anything else wrapped as ``{"result": ...}`` and marked for FastMCP's
client; content (no hint, ``None``, ``dict[str, Any]``) has neither. A result that breaks its
schema is the tool's error, and ``structured_output=`` overrides the hint."""

from __future__ import annotations

from typing import Any

import pytest
from support.structured_app import server as structured_server

from presa_trio import Server
from presa_trio.testing import open_client

SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "structured", "version": "1.0.0"}}
POINT = {
    "title": "Point",
    "type": "object",
    "properties": {"x": {"title": "X", "type": "number"}, "y": {"title": "Y", "type": "number"}},
    "required": ["x", "y"],
}


def wrapped(schema: dict[str, Any], **defs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
        "additionalProperties": False,
        "x-fastmcp-wrap-result": True,
    }
    return {**found, "$defs": defs} if defs else found


SCHEMAS: dict[str, Any] = {
    "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
    "greeting": wrapped({"type": "string"}),
    "double": wrapped({"type": "integer"}),
    "totals": {
        "title": "Totals",
        "type": "object",
        "properties": {
            "count": {"title": "Count", "type": "integer"},
            "names": {"title": "Names", "type": "array", "items": {"type": "string"}},
        },
        "required": ["count", "names"],
    },
    "points": wrapped({"type": "array", "items": {"$ref": "#/$defs/Point"}}, Point=POINT),
    "reading": {
        "title": "Reading",
        "type": "object",
        "properties": {
            "sensor": {"title": "Sensor", "type": "string"},
            "value": {"title": "Value", "type": "number"},
        },
        "required": ["sensor", "value"],
    },
    "maybe": wrapped({"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}, Point=POINT),
    "nothing": None,
}


async def test_each_hint_has_its_exact_output_schema() -> None:
    async with open_client(structured_server) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
    assert {name: tools[name].get("outputSchema") for name in SCHEMAS} == SCHEMAS


@pytest.mark.parametrize(
    ("name", "arguments", "text", "structured"),
    [
        ("counts", {}, '{"tea": 2, "cake": 1}', {"tea": 2, "cake": 1}),
        ("greeting", {"name": "Ada"}, "Hello, Ada", {"result": "Hello, Ada"}),
        ("double", {"n": 21}, "42", {"result": 42}),
        ("totals", {}, '{"count": 2, "names": ["a", "b"]}', {"count": 2, "names": ["a", "b"]}),
        (
            "points",
            {},
            '[{"x": 1.0, "y": 2.0}, {"x": 3.0, "y": 4.5}]',
            {"result": [{"x": 1.0, "y": 2.0}, {"x": 3.0, "y": 4.5}]},
        ),
        ("reading", {}, '{"sensor": "north", "value": 21.5}', {"sensor": "north", "value": 21.5}),
        ("maybe", {"found": True}, '{"x": 0.5, "y": 0.25}', {"result": {"x": 0.5, "y": 0.25}}),
        ("maybe", {"found": False}, None, {"result": None}),  # None: no content block
    ],
)
async def test_each_hint_has_its_exact_structured_content(
    name: str, arguments: dict[str, Any], text: str | None, structured: Any
) -> None:
    async with open_client(structured_server) as client:
        result = await client.call_tool(name, arguments)
    assert result == {
        "resultType": "complete",
        "content": [] if text is None else [{"type": "text", "text": text}],
        "structuredContent": structured,
        "_meta": SERVER_INFO,
    }


async def test_content_returns_have_no_structured_content() -> None:
    server = Server("structured", "1.0.0")

    @server.tool(thread=False)
    def nothing() -> None:
        return None

    @server.tool(thread=False)
    def unhinted():  # type: ignore[no-untyped-def]
        return "as it is"

    @server.tool(thread=False)
    def block() -> dict[str, Any]:
        return {"type": "text", "text": "a block"}

    async with open_client(server) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        assert [name for name, tool in tools.items() if "outputSchema" in tool] == []
        assert (await client.call_tool("nothing"))["content"] == []
        assert (await client.call_tool("unhinted"))["content"] == [
            {"type": "text", "text": "as it is"}
        ]
        done = await client.call_tool("block")
    assert done == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "a block"}],
        "_meta": SERVER_INFO,
    }


async def test_a_result_that_breaks_its_schema_is_the_tools_error() -> None:
    server = Server("structured", "1.0.0")

    @server.tool(thread=False)
    def liar() -> dict[str, int]:
        return {"tea": "two"}  # type: ignore[dict-item]

    async with open_client(server) as client:
        result = await client.call_tool("liar")
    assert result == {
        "resultType": "complete",
        "content": [
            {
                "type": "text",
                "text": "Tool liar returned output that does not match its outputSchema",
            }
        ],
        "isError": True,
        "_meta": SERVER_INFO,
    }


async def test_structured_output_overrides_the_hint() -> None:
    server = Server("structured", "1.0.0")

    @server.tool(thread=False, structured_output=False)
    def plain() -> str:
        return "text only"

    async with open_client(server) as client:
        (tool,) = await client.list_tools()
        result = await client.call_tool("plain")
    assert "outputSchema" not in tool
    assert "structuredContent" not in result
    with pytest.raises(TypeError, match="gives no outputSchema"):

        @server.tool(structured_output=True)
        def block() -> dict[str, Any]:
            return {"type": "text", "text": "a block"}
