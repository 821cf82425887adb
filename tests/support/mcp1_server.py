"""A real old-era server for the client CLI's tests: the published ``mcp`` 1.x FastMCP.

Run by the interpreter of its own virtualenv (tests/support/client_installs.py):
``python mcp1_server.py stdio`` serves on stdin/stdout; ``python mcp1_server.py http PORT``
serves Streamable HTTP at http://127.0.0.1:PORT/mcp. Its tools: ``add`` (two integers),
``fail`` (an error result), ``ask`` (logs a line, then asks the client's name with an
elicitation) and ``count`` (one progress notification per step). A resource,
``note://greeting``.
"""

from __future__ import annotations

import sys

from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel

PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
mcp = FastMCP("mcp1-server", host="127.0.0.1", port=PORT)


class Name(BaseModel):
    name: str


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("it failed on purpose")


@mcp.tool()
async def ask(ctx: Context) -> str:
    """Ask the client's name."""
    await ctx.info("asking for a name")
    answer = await ctx.elicit("Your name?", Name)
    if answer.action != "accept":
        return f"no name ({answer.action})"
    return f"Hello, {answer.data.name}"


@mcp.tool()
async def count(steps: int, ctx: Context) -> str:
    """Count, reporting each step as progress."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted to {steps}"


@mcp.resource("note://greeting")
def greeting() -> str:
    """A fixed note."""
    return "hello from mcp 1.x"


if __name__ == "__main__":
    mcp.run(transport="stdio" if sys.argv[1] == "stdio" else "streamable-http")
