"""subscriptions/listen against a real hypercorn trio worker on 127.0.0.1: a tool change reaches
two listeners at once, a resource update only its subscriber, and a thousand listeners leave no
state behind."""

from __future__ import annotations

import pytest
import trio
from support.live_http import mcp_request, open_exchange, tool

pytestmark = pytest.mark.e2e


async def listen(
    port: int, notifications: dict[str, object], request_id: int
) -> tuple[bytes, list[tuple[str, str]]]:
    return mcp_request(
        "subscriptions/listen", {"notifications": notifications}, request_id=request_id
    )


async def test_tool_change_reaches_two_concurrent_listeners(e2e_port: int) -> None:
    a_body, headers = await listen(e2e_port, {"toolsListChanged": True}, 11)
    b_body, _ = await listen(e2e_port, {"toolsListChanged": True}, 12)
    with trio.fail_after(10):
        async with (
            open_exchange(e2e_port, a_body, headers) as a,
            open_exchange(e2e_port, b_body, headers) as b,
        ):
            assert (await a.next_message())["method"] == "notifications/subscriptions/acknowledged"
            assert (await b.next_message())["method"] == "notifications/subscriptions/acknowledged"
            assert await tool(e2e_port, "change_tools") == 2
            for connection, sub in ((a, 11), (b, 12)):
                message = await connection.next_message()
                assert message == {
                    "jsonrpc": "2.0",
                    "method": "notifications/tools/list_changed",
                    "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": sub}},
                }


async def test_resource_update_reaches_only_its_subscriber(e2e_port: int) -> None:
    a_body, headers = await listen(e2e_port, {"resourceSubscriptions": ["test://a"]}, 21)
    b_body, _ = await listen(e2e_port, {"resourceSubscriptions": ["test://b"]}, 22)
    with trio.fail_after(10):
        async with (
            open_exchange(e2e_port, a_body, headers) as a,
            open_exchange(e2e_port, b_body, headers) as b,
        ):
            await a.next_message()
            await b.next_message()
            assert await tool(e2e_port, "touch", {"uri": "test://a"}) == 1
            assert (await a.next_message())["params"]["uri"] == "test://a"
            assert await tool(e2e_port, "touch", {"uri": "test://b"}) == 1
            assert (await b.next_message())["params"]["uri"] == "test://b"


async def test_a_thousand_listeners_leave_no_state(e2e_port: int) -> None:
    async def one(i: int) -> None:
        body, headers = await listen(e2e_port, {"toolsListChanged": True}, 1000 + i)
        async with open_exchange(e2e_port, body, headers) as connection:
            ack = await connection.next_message()
            assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 1000 + i

    with trio.fail_after(120):
        for batch in range(20):
            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(one, batch * 50 + i)
        while (await tool(e2e_port, "bus_stats"))["listeners"] != 0:  # noqa: ASYNC110
            await trio.sleep(0.01)
    assert await tool(e2e_port, "bus_stats") == {"listeners": 0}
    assert await tool(e2e_port, "change_tools") == 0
