"""A presa_trio server whose tools keep or break their ``outputSchema``, for ``strict=True``
in tests/testing_client (in process, and under hypercorn as ``strict_app:app``).

``reading`` keeps its derived schema; ``misreading`` returns a value its return annotation
forbids, which the server itself turns into an ``isError`` result; ``handmade`` returns a
``ToolResult`` whose ``structuredContent`` breaks its declared schema (a ``ToolResult`` is
sent as the tool built it); ``bare`` declares a schema and sends no structured content;
``refuse`` raises ``ToolError``; ``plain`` has no schema at all. ``ask`` asks the client's
name (an ``input_required`` round in 2026-07-28, a pushed elicitation in a session).
"""

from __future__ import annotations

from typing import Any, TypedDict

from presa_trio import Context, Server, ToolError, ToolResult
from presa_trio.mrtr import elicit

server = Server("strict")
#: How many times the server answered tools/list (a strict client lists its tools once).
LISTED = {"count": 0}


class Reading(TypedDict):
    city: str
    celsius: float


READING_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}


async def count_lists(ctx: Context, call_next: Any) -> dict[str, Any]:
    if ctx.method == "tools/list":
        LISTED["count"] += 1
    result: dict[str, Any] = await call_next(ctx)
    return result


server.add_middleware(count_lists)


@server.tool()
def reading(city: str) -> Reading:
    """A reading that matches its schema."""
    return {"city": city, "celsius": 21.5}


@server.tool()
def misreading(city: str) -> Reading:
    """A reading whose celsius is a string."""
    return {"city": city, "celsius": "warm"}  # type: ignore[typeddict-item]


@server.tool(output_schema=READING_SCHEMA)
def handmade(city: str) -> ToolResult:
    """A result built by hand, celsius a string."""
    text = [{"type": "text", "text": f"{city}: warm"}]
    return ToolResult(content=text, structured={"city": city, "celsius": "warm"})


@server.tool(output_schema=READING_SCHEMA)
def bare(city: str) -> ToolResult:
    """A result without the structured content its schema promises."""
    return ToolResult(content=[{"type": "text", "text": city}])


@server.tool()
def refuse(city: str) -> str:
    """Always fails, as a tool's own error."""
    raise ToolError(f"no data for {city}")


@server.tool()
def plain(city: str) -> str:
    """Text only."""
    return f"{city} is fine"


@server.tool()
async def ask(ctx: Context) -> str:
    """Ask the client's name."""
    question = elicit("Your name?", {"name": {"type": "string"}}, ["name"])
    answer = (await ctx.input({"name": question}))["name"]
    if answer.get("action") != "accept":
        return "no name"
    return f"Hello, {answer['content']['name']}"


app = server.asgi_app()
