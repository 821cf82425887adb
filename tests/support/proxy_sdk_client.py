"""Drive a server with the official MCP Python SDK's client (``mcp`` 2.x), for the proxy's
tests: ``python proxy_sdk_client.py URL`` over Streamable HTTP, or ``python
proxy_sdk_client.py --stdio CMD ARGS...`` spawning CMD. It lists the tools, calls ``add`` and
``steps`` (with a progress callback), reads ``note://greeting``, and prints what it saw as
one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import Client, StdioServerParameters


async def main(argv: list[str]) -> dict[str, Any]:
    server: Any = argv[0]
    if argv[0] == "--stdio":
        server = StdioServerParameters(command=argv[1], args=argv[2:])
    progress: list[dict[str, Any]] = []

    async def step(done: float, total: float | None, message: str | None) -> None:
        progress.append({"progress": done, "total": total, "message": message})

    async with Client(server, mode="auto") as client:
        tools = await client.list_tools()
        added = await client.call_tool("add", {"a": 2, "b": 3})
        steps = await client.call_tool("steps", {}, progress_callback=step)
        note = await client.read_resource("note://greeting")
        return {
            "protocol_version": client.protocol_version,
            "tools": sorted(tool.name for tool in tools.tools),
            "add": [block.model_dump(exclude_none=True) for block in added.content],
            "steps": [block.model_dump(exclude_none=True) for block in steps.content],
            "progress": progress,
            "note": [c.model_dump(exclude_none=True, mode="json") for c in note.contents],
        }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))))
