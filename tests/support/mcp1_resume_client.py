"""Call the ``relay`` tool of tests/support/sessions_app.py with the published ``mcp`` 1.x
client, over streamable HTTP at the URL given: ``python mcp1_resume_client.py URL``. Run by the
interpreter of its own virtualenv. Prints one JSON object: the log messages the client was
handed, in order, and the call's result (what the resumable stream test checks)."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

WAIT = timedelta(seconds=60)  # a bound on the call, not a pace


async def main(url: str) -> dict[str, Any]:
    logs: list[Any] = []

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with (
        streamable_http_client(url) as (read, write, _),
        ClientSession(read, write, logging_callback=log, read_timeout_seconds=WAIT) as session,
    ):
        initialized = await session.initialize()
        result = await session.call_tool("relay", {}, read_timeout_seconds=WAIT)
    return {
        "version": initialized.protocolVersion,
        "logs": logs,
        "result": result.model_dump(mode="json", exclude_none=True, by_alias=True),
    }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1])))
