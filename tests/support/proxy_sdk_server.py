"""A server written with the official MCP Python SDK (``mcp`` 2.x, the test venv's), for the
proxy's tests: ``python proxy_sdk_server.py http PORT`` serves Streamable HTTP at
http://127.0.0.1:PORT/mcp under uvicorn; ``python proxy_sdk_server.py stdio`` serves on
stdin/stdout. Its tools: ``add`` (two integers) and ``steps`` (three progress notifications,
then a text); a resource, ``note://greeting``.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("proxy-sdk-server")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
async def steps(ctx: Context) -> str:
    """Report progress three times, then finish."""
    for step in range(1, 4):
        await ctx.report_progress(step, 3, f"step {step}")
    return "three steps"


@mcp.resource("note://greeting")
def greeting() -> str:
    """A fixed note."""
    return "hello through the proxy"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        mcp.run(transport="stdio")
    else:
        import uvicorn

        uvicorn.run(
            mcp.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning"
        )
