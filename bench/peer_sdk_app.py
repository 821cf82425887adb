"""The official MCP Python SDK (``mcp`` 2.x) serving the peers benchmark's plain tool.

Served by ``bench/peers.py`` under hypercorn's trio worker (anyio on trio); not imported by
the library. ``app`` is the SDK's stateless Streamable HTTP app answering JSON (as
``sdk_app.py``, for 2026-07-28 requests); ``session_app`` is its stateful app with its
defaults (``initialize`` sessions, answers on event streams), for the older era. The SDK has
no Tasks extension of its own to serve (its extension hook is what ``fastmcp-tasks`` builds
on), so it has no ``quick`` or ``park``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-peer")


@server.tool(structured_output=False)  # plain text content, as the other peers answer
def test_simple_text() -> str:
    """Returns a simple text content block."""
    return "This is a simple text response for testing."


app = server.streamable_http_app(stateless_http=True, json_response=True)
session_app = server.streamable_http_app()
