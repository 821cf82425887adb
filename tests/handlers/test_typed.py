"""Typed arguments and results through the schema-checking test client: what a handler
receives, what the client reads back (exact results, codes, isError, structuredContent)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import pathlib
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, TypedDict

import pytest
import trio
from pydantic import BaseModel, Field

from presa_trio import Context, Param, Server, ToolResult, Validation
from presa_trio.ext.tasks import EXTENSION_ID, TasksExtension
from presa_trio.testing import Client, RpcError, open_client

UTC = datetime.UTC


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Where:
    lat: float
    lon: float


class Box(TypedDict):
    color: Color
    size: int


class Order(BaseModel):
    item: str
    qty: int = Field(ge=1)
    when: datetime.datetime | None = None


@dataclasses.dataclass
class Receipt:
    order: Order
    paid: decimal.Decimal
    at: datetime.datetime
    tags: set[str]
    id: uuid.UUID


def kinds(values: dict[str, Any]) -> dict[str, str]:
    """Each received argument as ``type: repr``, to assert exactly what arrived."""
    return {k: f"{type(v).__name__}: {v!r}" for k, v in values.items()}


def build_server() -> Server:
    server = Server("typed", validation=Validation(outbound=True))

    @server.tool(thread=False)
    def receive(
        where: Where,
        color: Color,
        tags: set[str],
        pair: tuple[str, int],
        order: Order,
        at: datetime.datetime,
        day: datetime.date,
        ident: uuid.UUID,
        amount: decimal.Decimal,
        path: pathlib.Path,
        mode: Literal["a", "b"],
        maybe: int | None,
        nested: dict[str, list[Where]],
        box: Box,
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
    ) -> str:
        """Says what it received."""
        return json.dumps(kinds(locals()), sort_keys=True)

    @server.tool(thread=False)
    def double(n: int, ctx: Context) -> int:
        return n * 2

    @server.tool(thread=False)
    def floor(n: Annotated[int, Param(extra={"minimum": 0})]) -> int:
        """A bound only the schema knows (no pydantic metadata)."""
        return n

    @server.tool(
        thread=False,
        input_schema={
            "type": "object",
            "properties": {"color": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["color"],
        },
    )
    def given(color: Color, n: int = 0) -> str:
        return f"{color!r} {n!r}"

    @server.tool(thread=False)
    def now() -> datetime.datetime:
        return datetime.datetime(2026, 7, 28, 9, 30, tzinfo=UTC)

    @server.tool(thread=False)
    def place() -> Where | None:
        return Where(1.5, 2.0)

    @server.tool(thread=False)
    def names() -> list[str]:
        return ["a", "b"]

    @server.tool(thread=False)
    def pick(color: Color) -> Color:
        return color

    @server.tool(thread=False)
    def receipt() -> Receipt:
        order = Order(item="tea", qty=2, when=datetime.datetime(2026, 7, 28, tzinfo=UTC))
        return Receipt(
            order=order,
            paid=decimal.Decimal("3.50"),
            at=datetime.datetime(2026, 7, 28, 10, tzinfo=UTC),
            tags={"b", "a"},
            id=uuid.UUID(int=7),
        )

    @server.tool(thread=False)
    def make_order(qty: int) -> Order:
        return Order(item="tea", qty=qty)

    @server.tool(thread=False)
    def text() -> str:
        return "plain"

    @server.tool(thread=False)
    def block() -> dict[str, Any]:
        return {"type": "text", "text": "a block"}

    @server.tool(thread=False)
    def whole() -> ToolResult:
        return ToolResult(content=[{"type": "text", "text": "x"}], structured={"at": now()})

    @server.prompt()
    def plan(count: int, day: datetime.date, topic: str = "tea") -> str:
        return f"{count!r} {day!r} {topic!r}"

    @server.resource("notes://{note_id}")
    def note(note_id: int) -> str:
        return f"note {note_id!r}"

    @server.resource("notes://{slug}/text")
    def note_text(slug: str) -> str:
        return f"text of {slug!r}"

    @server.resource("days://{day}")
    def on(day: datetime.date) -> str:
        return f"{day!r}"

    @server.resource("days://{word}")
    def word(word: str) -> str:
        return f"word {word!r}"

    return server


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with open_client(build_server()) as c:
        yield c


RECEIVE = {
    "where": {"lat": 1, "lon": 2.5},
    "color": "red",
    "tags": ["x", "y"],
    "pair": ["p", 1],
    "order": {"item": "i", "qty": 3, "when": "2026-07-28T10:00:00Z"},
    "at": "2026-07-28T10:00:00+02:00",
    "day": "2026-07-28",
    "ident": "00000000-0000-0000-0000-000000000005",
    "amount": "1.50",
    "path": "/tmp/x",
    "mode": "a",
    "maybe": None,
    "nested": {"k": [{"lat": 0, "lon": 0}]},
    "box": {"color": "green", "size": 1},
}


def text_of(result: dict[str, Any]) -> str:
    assert len(result["content"]) == 1
    text: str = result["content"][0]["text"]
    return text


async def test_every_argument_arrives_as_hinted(client: Client) -> None:
    result = await client.call_tool("receive", RECEIVE)
    assert "isError" not in result
    received = json.loads(text_of(result))
    assert received == {
        "where": "Where: Where(lat=1.0, lon=2.5)",
        "color": "Color: <Color.RED: 'red'>",
        "tags": received["tags"],  # a set: its order is not fixed
        "pair": "tuple: ('p', 1)",
        "order": "Order: Order(item='i', qty=3, when=datetime.datetime(2026, 7, 28, 10, 0,"
        " tzinfo=TzInfo(0)))",
        "at": "datetime: datetime.datetime(2026, 7, 28, 10, 0, tzinfo=TzInfo(7200))",
        "day": "date: datetime.date(2026, 7, 28)",
        "ident": "UUID: UUID('00000000-0000-0000-0000-000000000005')",
        "amount": "Decimal: Decimal('1.50')",
        "path": f"{type(pathlib.Path()).__name__}: {pathlib.Path('/tmp/x')!r}",
        "mode": "str: 'a'",
        "maybe": "NoneType: None",
        "nested": "dict: {'k': [Where(lat=0.0, lon=0.0)]}",
        "box": "dict: {'color': <Color.GREEN: 'green'>, 'size': 1}",
        "limit": "int: 10",
    }
    assert received["tags"] in ("set: {'x', 'y'}", "set: {'y', 'x'}")


async def test_strings_for_numbers_are_converted_as_the_sdk_does(client: Client) -> None:
    result = await client.call_tool("receive", {**RECEIVE, "limit": "5", "maybe": "3"})
    received = json.loads(text_of(result))
    assert (received["limit"], received["maybe"]) == ("int: 5", "int: 3")
    doubled = await client.call_tool("double", {"n": "21"})
    assert doubled["structuredContent"] == {"result": 42}
    assert doubled["content"] == [{"type": "text", "text": "42"}]
    doubled = await client.call_tool("double", {"n": 4.0})  # an integer to JSON Schema
    assert doubled["content"] == [{"type": "text", "text": "8"}]  # not 8.0: n was an int


async def test_a_value_that_does_not_convert_is_an_input_error(client: Client) -> None:
    bad = {**RECEIVE, "limit": 99, "color": "blue", "at": "nope"}
    result = await client.call_tool("receive", bad)
    assert result["isError"] is True
    assert result["content"] == [
        {
            "type": "text",
            "text": "Invalid arguments: color: Input should be 'red' or 'green'; "
            "at: Input should be a valid datetime or date, input is too short; "
            "limit: Input should be less than or equal to 50",
        }
    ]
    assert "structuredContent" not in result
    result = await client.call_tool("double", {"n": "twenty"})
    assert result["isError"] is True
    assert text_of(result) == (
        "Invalid arguments: n: Input should be a valid integer, "
        "unable to parse string as an integer"
    )


async def test_a_schema_valid_value_that_does_not_convert_is_an_input_error(
    client: Client,
) -> None:
    # format is an annotation in 2020-12: the schema lets the string through, pydantic not
    result = await client.call_tool("receive", {**RECEIVE, "day": "someday"})
    assert result["isError"] is True
    assert text_of(result) == (
        "Invalid arguments: day: Input should be a valid date or datetime, input is too short"
    )


async def test_unknown_and_missing_arguments_are_input_errors(client: Client) -> None:
    result = await client.call_tool("double", {"n": 1, "zzz": 2})
    assert result["isError"] is True
    assert text_of(result) == "Invalid arguments: zzz: Extra inputs are not permitted"
    result = await client.call_tool("double", {})
    assert result["isError"] is True
    assert text_of(result) == "Invalid arguments: n: Field required"


async def test_a_converted_value_still_meets_the_schema(client: Client) -> None:
    assert (await client.call_tool("floor", {"n": "3"}))["structuredContent"] == {"result": 3}
    result = await client.call_tool("floor", {"n": "-1"})
    assert result["isError"] is True
    assert text_of(result) == "Invalid arguments: n: -1 is less than the minimum of 0"


async def test_a_given_input_schema_is_the_contract_and_arguments_still_convert(
    client: Client,
) -> None:
    result = await client.call_tool("given", {"color": "green", "n": 2})
    assert text_of(result) == "<Color.GREEN: 'green'> 2"
    result = await client.call_tool("given", {"color": "green", "n": "2"})  # no lax pass here
    assert result["isError"] is True
    assert text_of(result) == 'Invalid arguments: n: "2" is not of type "integer"'
    result = await client.call_tool("given", {"color": "blue"})
    assert result["isError"] is True
    assert text_of(result) == "Invalid arguments: color: Input should be 'red' or 'green'"


async def test_schemas_of_typed_tools(client: Client) -> None:
    tools = {t["name"]: t for t in await client.list_tools()}
    props = tools["receive"]["inputSchema"]["properties"]
    assert props["limit"] == {"type": "integer", "maximum": 50, "minimum": 1, "default": 10}
    assert props["order"] == {
        "properties": {
            "item": {"title": "Item", "type": "string"},
            "qty": {"minimum": 1, "title": "Qty", "type": "integer"},
            "when": {
                "anyOf": [{"format": "date-time", "type": "string"}, {"type": "null"}],
                "default": None,
                "title": "When",
            },
        },
        "required": ["item", "qty"],
        "title": "Order",
        "type": "object",
    }
    assert props["at"] == {"format": "date-time", "type": "string"}
    assert props["ident"] == {"format": "uuid", "type": "string"}
    assert props["amount"] == {"anyOf": [{"type": "number"}, {"type": "string"}]}
    assert props["path"] == {"format": "path", "type": "string"}
    assert tools["double"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "additionalProperties": False,
        "x-fastmcp-wrap-result": True,
    }
    assert tools["text"]["outputSchema"]["properties"] == {"result": {"type": "string"}}
    assert tools["now"]["outputSchema"]["properties"] == {
        "result": {"format": "date-time", "type": "string"}
    }
    assert tools["receipt"]["outputSchema"]["properties"]["paid"] == {
        "title": "Paid",
        "type": "string",
    }
    for name in ("block", "whole"):
        assert "outputSchema" not in tools[name], name


async def test_values_that_are_not_objects_come_back_wrapped(client: Client) -> None:
    now = await client.call_tool("now")
    assert now["structuredContent"] == {"result": "2026-07-28T09:30:00Z"}
    assert now["content"] == [{"type": "text", "text": '"2026-07-28T09:30:00Z"'}]
    place = await client.call_tool("place")
    assert place["structuredContent"] == {"result": {"lat": 1.5, "lon": 2.0}}
    assert place["content"] == [{"type": "text", "text": '{"lat": 1.5, "lon": 2.0}'}]
    names = await client.call_tool("names")
    assert names["structuredContent"] == {"result": ["a", "b"]}
    assert names["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    picked = await client.call_tool("pick", {"color": "green"})
    assert picked["structuredContent"] == {"result": "green"}
    assert picked["content"] == [{"type": "text", "text": '"green"'}]


async def test_objects_with_typed_fields_come_back_as_json(client: Client) -> None:
    result = await client.call_tool("receipt")
    expected = {
        "order": {"item": "tea", "qty": 2, "when": "2026-07-28T00:00:00Z"},
        "paid": "3.50",
        "at": "2026-07-28T10:00:00Z",
        "tags": ["a", "b"],
        "id": "00000000-0000-0000-0000-000000000007",
    }
    assert result["structuredContent"] == expected
    assert json.loads(text_of(result)) == expected
    order = await client.call_tool("make_order", {"qty": 2})
    assert order["structuredContent"] == {"item": "tea", "qty": 2, "when": None}


async def test_a_validation_error_inside_the_tool_is_not_an_input_error(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(RpcError) as caught:  # Order(qty=0) fails in the tool's own code
        await client.call_tool("make_order", {"qty": 0})
    assert (caught.value.code, caught.value.message) == (-32603, "Internal error")
    assert "handling tools/call failed" in caplog.text


async def test_content_returns_keep_their_exact_output(client: Client) -> None:
    assert await client.call_tool("block") == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "a block"}],
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "typed", "version": "0.1.0"}},
    }
    assert await client.call_tool("text") == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "plain"}],
        "structuredContent": {"result": "plain"},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "typed", "version": "0.1.0"}},
    }
    whole = await client.call_tool("whole")
    assert whole["structuredContent"] == {"at": "2026-07-28T09:30:00Z"}


async def test_prompt_arguments_are_converted(client: Client) -> None:
    result = await client.get_prompt("plan", {"count": "5", "day": "2026-07-28"})
    assert result["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "5 datetime.date(2026, 7, 28) 'tea'"},
        }
    ]
    with pytest.raises(RpcError) as caught:
        await client.get_prompt("plan", {"count": "five", "day": "2026-07-28"})
    assert caught.value.code == -32602
    assert caught.value.message == (
        "Invalid prompt arguments: count: Input should be a valid integer, "
        "unable to parse string as an integer"
    )
    prompts = (await client.request("prompts/list"))["prompts"]
    assert prompts[0]["arguments"] == [
        {"name": "count", "required": True},
        {"name": "day", "required": True},
        {"name": "topic"},
    ]


async def test_template_variables_are_converted(client: Client) -> None:
    read = await client.read_resource("notes://5")
    assert read["contents"] == [{"uri": "notes://5", "text": "note 5"}]
    read = await client.read_resource("days://2026-07-28")
    assert read["contents"] == [{"uri": "days://2026-07-28", "text": "datetime.date(2026, 7, 28)"}]
    read = await client.read_resource("days://monday")  # not a date: the next template's
    assert read["contents"] == [{"uri": "days://monday", "text": "word 'monday'"}]
    read = await client.read_resource("notes://abc/text")
    assert read["contents"] == [{"uri": "notes://abc/text", "text": "text of 'abc'"}]


async def test_a_template_variable_that_does_not_convert_is_not_found(client: Client) -> None:
    with pytest.raises(RpcError) as caught:
        await client.read_resource("notes://abc")
    assert (caught.value.code, caught.value.message, caught.value.data) == (
        -32602,
        "Resource not found",
        {"uri": "notes://abc"},
    )


async def test_a_task_takes_lax_arguments_as_a_direct_call_does() -> None:
    server = Server("typed-tasks")
    server.add_extension(TasksExtension())

    @server.tool(options={"tasks": "required"})
    async def slow(n: int, at: datetime.date) -> str:
        return f"{n!r} {at!r}"

    with_tasks = {"extensions": {EXTENSION_ID: {}}}
    async with open_client(server, capabilities=with_tasks) as client:
        refused = await client.call_tool("slow", {"n": "x", "at": "2026-07-28"})
        assert refused["resultType"] == "complete"
        assert refused["isError"] is True
        assert text_of(refused) == (
            "Invalid arguments: n: Input should be a valid integer, "
            "unable to parse string as an integer"
        )
        task_id = await client.create_task("slow", {"n": "4", "at": "2026-07-28"})
        with trio.fail_after(5):
            done = await client.wait_task(task_id)
        assert done["status"] == "completed"
        assert done["result"]["content"] == [
            {"type": "text", "text": "4 datetime.date(2026, 7, 28)"}
        ]
