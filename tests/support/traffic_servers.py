"""Servers presa_trio did not write, for real captures: ``python traffic_servers.py KIND``
serves over stdio the test venv's ``mcp`` 2.x ``MCPServer`` (KIND ``mcp2``) or FastMCP
(KIND ``fastmcp``). Their tools: ``add`` (two integers, a structured result) and ``fail``
(an error result); a resource, ``note://greeting``.
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
    if kind == "fastmcp":
        server.run(transport="stdio", show_banner=False)
    else:
        server.run(transport="stdio")
