"""A client that disconnects from a real hypercorn trio worker on 127.0.0.1 cancels its
request's handler."""

from __future__ import annotations

import pytest
import trio
from support.live_http import mcp_request, open_exchange, tool

pytestmark = pytest.mark.e2e


async def test_client_disconnect_cancels_the_handler(e2e_port: int) -> None:
    before = await tool(e2e_port, "cancellations")
    body, headers = mcp_request(
        "tools/call", {"name": "sleeper", "arguments": {}}, meta={"progressToken": 1}
    )
    async with open_exchange(e2e_port, body, headers) as connection:
        first = await connection.next_message()
        assert first["method"] == "notifications/progress"
    with trio.fail_after(5):  # polling from outside: the server is another process
        while (await tool(e2e_port, "cancellations"))["cancelled"] == before["cancelled"]:  # noqa: ASYNC110
            await trio.sleep(0.01)
    after = await tool(e2e_port, "cancellations")
    assert after == {"started": before["started"] + 1, "cancelled": before["cancelled"] + 1}
