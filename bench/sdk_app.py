"""The official MCP Python SDK's stateless Streamable HTTP server with the benchmark's tool.

Peer for bench/http_bench.py only: ``mcp`` (the test extra) ``MCPServer`` with one tool,
``test_simple_text``, answering JSON (no SSE) and keeping no session, as presa does.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-bench")


@server.tool(structured_output=False)  # plain text content, as the presa fixture answers
def test_simple_text() -> str:
    """Returns a simple text content block."""
    return "This is a simple text response for testing."


app = server.streamable_http_app(stateless_http=True, json_response=True)
