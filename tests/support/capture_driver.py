"""Drive any stdio MCP server with the test venv's ``mcp`` 2.x client, for captures.

``python capture_driver.py MODE TARGET CALLS``: MODE is ``legacy`` (the initialize handshake,
2025-11-25), ``2025-06-18`` (the handshake asking for that older revision) or ``auto`` (the
client's default: 2026-07-28 when the server speaks it). TARGET is JSON ``{"command", "args",
"env", "cwd"}``; CALLS a JSON list of ``[tool, arguments]``. It lists the tools, makes each
call, lists and reads the resources, and prints what it saw as one JSON object.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio
import mcp.client.session
from mcp import Client, StdioServerParameters, types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.simplefilter("ignore", MCPDeprecationWarning)
WAIT = 60.0  # seconds for the whole exercise (a bound, not a pace)


async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def main(mode: str, target: dict[str, Any], calls: list[list[Any]]) -> dict[str, Any]:
    if mode == "2025-06-18":
        mcp.client.session.LATEST_HANDSHAKE_VERSION = mode  # type: ignore[misc]
        mode = "legacy"
    server = StdioServerParameters(
        command=target["command"], args=target["args"], env=target.get("env"), cwd=target.get("cwd")
    )
    seen: dict[str, Any] = {}
    with anyio.fail_after(WAIT):
        async with Client(server, mode=mode, elicitation_callback=elicit) as client:
            seen["protocol_version"] = client.protocol_version
            seen["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
            seen["calls"] = {}
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                seen["calls"][name] = {"is_error": result.is_error}
            resources = (await client.list_resources()).resources
            seen["resources"] = [str(resource.uri) for resource in resources]
            for resource in resources[:2]:
                await client.read_resource(resource.uri)
    return seen


if __name__ == "__main__":
    arguments = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    print(json.dumps(anyio.run(main, *arguments)))
