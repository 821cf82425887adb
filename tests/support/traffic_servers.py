"""Servers presa_trio did not write, for real captures: ``python traffic_servers.py KIND
[PORT]`` serves the test venv's ``mcp`` 2.x ``MCPServer`` (KIND ``mcp2``) or FastMCP (KIND
``fastmcp``) over stdio, or with PORT over Streamable HTTP at http://127.0.0.1:PORT/mcp.
Their tools: ``add`` (two integers, a structured result) and ``fail`` (an error result); a
resource, ``note://greeting``.
"""

from __future__ import annotations

import sys
from typing import Any


def build(kind: str) -> Any:
    if kind == "mcp2":
        from mcp.server.mcpserver import MCPServer

        server: Any = MCPServer("mcp2-traffic")
    else:
        from fastmcp import FastMCP

        server = FastMCP("fastmcp-traffic")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def fail() -> str:
        """Always fails."""
        raise ValueError("it failed on purpose")

    @server.resource("note://greeting")
    def greeting() -> str:
        """A fixed note."""
        return "hello"

    return server


if __name__ == "__main__":
    kind = sys.argv[1]
    server = build(kind)
    options: dict[str, Any] = {"show_banner": False} if kind == "fastmcp" else {}
    if len(sys.argv) > 2:
        options.update(host="127.0.0.1", port=int(sys.argv[2]))
        server.run(transport="streamable-http", **options)
    else:
        server.run(transport="stdio", **options)
