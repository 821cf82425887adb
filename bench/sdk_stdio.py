"""The official MCP Python SDK's stdio server with the benchmark's tool.

Peer for bench/stdio_bench.py only: ``mcp`` (the test extra) ``MCPServer`` with one tool,
``test_simple_text``, answering plain text, served as the SDK serves stdio (``run("stdio")``).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-bench")


@server.tool(structured_output=False)  # plain text content, as the presa fixture answers
def test_simple_text() -> str:
    """Returns a simple text content block."""
    return "This is a simple text response for testing."


if __name__ == "__main__":
    server.run("stdio")
