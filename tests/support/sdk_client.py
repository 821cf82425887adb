"""Drive a presa_trio server with the official MCP Python SDK client (``mcp`` on PyPI).

Run as a script in its own interpreter (asyncio), so the SDK's event loop never meets the
test runner's trio loop: ``python sdk_client.py URL`` or ``python sdk_client.py --stdio``.
It prints one JSON object describing what the SDK saw.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import Client, StdioServerParameters


async def main(target: str) -> dict[str, Any]:
    if target == "--stdio":
        server: Any = StdioServerParameters(
            command=sys.executable,
            args=["-m", "presa_trio", "serve", "fixtures.conformance:server", "--stdio"],
        )
    else:
        server = target
    async with Client(server, mode="auto") as client:
        tools = await client.list_tools()
        text = await client.call_tool("test_simple_text", {})
        greet = await client.call_tool("greet", {"name": "SDK"})
        failing = await client.call_tool("test_error_handling", {})
        info = client.server_info
        return {
            "protocol_version": client.protocol_version,
            "server_name": info.name if info is not None else None,
            "has_tools_capability": client.server_capabilities.tools is not None,
            "tool_names": [tool.name for tool in tools.tools],
            "simple_text": [block.model_dump(exclude_none=True) for block in text.content],
            "greet": [block.model_dump(exclude_none=True) for block in greet.content],
            "error_is_error": failing.is_error,
        }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
