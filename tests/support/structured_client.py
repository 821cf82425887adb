"""Call every tool of structured_app.py with FastMCP's client and with the official MCP SDK's
client, and print (as one JSON line) FastMCP's ``.data`` and the SDK's ``structured_content``
for each: ``python structured_client.py URL``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from typing import Any

from fastmcp import Client as FastMCPClient
from mcp import Client

CALLS: dict[str, dict[str, Any]] = {
    "counts": {},
    "greeting": {"name": "Ada"},
    "double": {"n": 21},
    "totals": {},
    "points": {},
    "reading": {},
    "maybe": {"found": True},
    "nothing": {},
}


def plain(value: Any) -> Any:
    """FastMCP's ``.data`` as JSON data: it builds dataclasses for object schemas."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"class": type(value).__name__, **plain(dataclasses.asdict(value))}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


async def main(url: str) -> None:
    seen: dict[str, Any] = {"fastmcp": {}, "sdk": {}}
    async with FastMCPClient(url) as client:
        for name, arguments in CALLS.items():
            result = await client.call_tool(name, arguments)
            seen["fastmcp"][name] = plain(result.data)
    async with Client(url) as sdk:
        for name, arguments in CALLS.items():
            called = await sdk.call_tool(name, arguments)
            seen["sdk"][name] = called.structured_content
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
