"""A server presa_trio did not write: the official MCP Python SDK's ``MCPServer`` (the ``mcp``
2.x of the test venv), for the tests of ``presa_trio.testing`` on any server.

``python sdk_server.py stdio`` serves on stdin/stdout; ``python sdk_server.py http PORT`` serves
Streamable HTTP at http://127.0.0.1:PORT/mcp (under uvicorn, as the SDK runs it). Its tools:
``add`` (two integers), ``count`` (reports one progress notification per step), ``weather``
(structured output the SDK checks), ``broken_weather`` (declares the same outputSchema by
hand, which the SDK then advertises without checking, and breaks it: ``celsius`` is a
string) and ``fail`` (an error result). A resource ``note://greeting``, a prompt ``greet``
and a completion of its ``name`` argument.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp_types import CallToolResult, Completion, TextContent
from pydantic import BaseModel


class Weather(BaseModel):
    city: str
    celsius: float


def broken_weather(city: str) -> CallToolResult:
    """The weather, with ``celsius`` as a string its outputSchema forbids."""
    return CallToolResult(
        content=[TextContent(type="text", text=f"{city}: warm")],
        structured_content={"city": city, "celsius": "warm"},
    )


# A hand-built outputSchema: the SDK advertises it and leaves the result unchecked.
broken = Tool.from_function(broken_weather)
broken.fn_metadata.output_schema = Weather.model_json_schema()
server = MCPServer("sdk-server", tools=[broken])


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Count to ``steps``, reporting each step as progress."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted to {steps}"


@server.tool()
def weather(city: str) -> Weather:
    """The weather in a city, as data."""
    return Weather(city=city, celsius=21.5)


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("it failed on purpose")


@server.resource("note://greeting")
def greeting() -> str:
    """A fixed note."""
    return "hello from the SDK"


@server.prompt()
def greet(name: str) -> str:
    """Ask to greet someone."""
    return f"Please greet {name}."


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion:
    names = ["Ada", "Alan", "Grace"]
    return Completion(values=[n for n in names if n.startswith(argument.value)])


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
