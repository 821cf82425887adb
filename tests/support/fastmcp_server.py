"""A server presa_trio did not write: FastMCP (the ``fastmcp`` of the test venv), for the
tests of ``presa_trio.testing`` on any server.

``python fastmcp_server.py stdio`` serves on stdin/stdout; ``python fastmcp_server.py http
PORT`` serves Streamable HTTP at http://127.0.0.1:PORT/mcp. Its tools: ``add`` (two
integers) and ``count`` (one progress notification per step); a resource
``note://greeting``.
"""

from __future__ import annotations

import sys

from fastmcp import Context, FastMCP

mcp = FastMCP("fastmcp-server")


@mcp.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool
async def count(steps: int, ctx: Context) -> str:
    """Count to ``steps``, reporting each step as progress."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps)
    return f"counted to {steps}"


@mcp.resource("note://greeting")
def greeting() -> str:
    """A fixed note."""
    return "hello from FastMCP"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        mcp.run("stdio", show_banner=False)
    else:
        mcp.run("http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
