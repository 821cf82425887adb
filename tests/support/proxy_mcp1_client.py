"""Drive tests/support/mcp1_server.py with the published ``mcp`` 1.x client, for the proxy's
tests. Run by the interpreter of the cached ``mcp`` 1.x virtualenv
(tests/support/client_installs.py): ``python proxy_mcp1_client.py URL``. An ``initialize``
session over Streamable HTTP: the tools listed, ``add`` called, ``ask`` answered (the server
asks on the call's SSE stream, the client answers with a POST), the note read; the session is
DELETEd when the transport closes. It prints what it saw as one JSON object.
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client
from pydantic import AnyUrl


async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def main(url: str) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        read, write, session_id = await stack.enter_async_context(streamablehttp_client(url))
        session = await stack.enter_async_context(
            ClientSession(read, write, elicitation_callback=elicit)
        )
        initialized = await session.initialize()
        tools = await session.list_tools()
        added = await session.call_tool("add", {"a": 2, "b": 3})
        asked = await session.call_tool("ask", {})
        note = await session.read_resource(AnyUrl("note://greeting"))
        seen = {
            "protocol_version": initialized.protocolVersion,
            "tools": sorted(tool.name for tool in tools.tools),
            "add": [block.model_dump(mode="json", exclude_none=True) for block in added.content],
            "ask": [block.model_dump(mode="json", exclude_none=True) for block in asked.content],
            "note": [c.model_dump(mode="json", exclude_none=True) for c in note.contents],
            "session_id": session_id(),
        }
    return seen


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1])))
