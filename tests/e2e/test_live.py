"""End to end against a real hypercorn trio worker on 127.0.0.1."""

from __future__ import annotations

import json

import pytest
import trio
from live_http import call, mcp_request, open_exchange, request, tool

pytestmark = pytest.mark.e2e


async def test_discover_over_a_socket(fixture_port: int) -> None:
    result = await call(fixture_port, "server/discover")
    assert result["supportedVersions"] == ["2026-07-28"]
    assert (
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
        == "presa-trio-conformance-fixture"
    )


async def test_bad_input_over_a_socket(fixture_port: int) -> None:
    body, headers = mcp_request("server/discover")
    for raw, status, code in ((b"{", 400, -32700), (b"[]", 400, -32600)):
        response = await request(fixture_port, raw, headers)
        assert response.status == status
        assert response.messages[0]["error"]["code"] == code
    for verb in ("GET", "DELETE"):
        assert (await request(fixture_port, b"", headers, method=verb)).status == 405
    foreign = [*headers, ("origin", "http://evil.example.com")]
    assert (await request(fixture_port, body, foreign)).status == 403
    big = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {"pad": "x" * (5 * 1024 * 1024)},
        }
    ).encode()
    response = await request(fixture_port, big, headers)
    assert response.status == 413
    assert (await call(fixture_port, "server/discover"))["resultType"] == "complete"


async def test_progress_streams_over_sse(fixture_port: int) -> None:
    body, headers = mcp_request(
        "tools/call",
        {"name": "test_tool_with_progress", "arguments": {}},
        meta={"progressToken": 5},
    )
    response = await request(fixture_port, body, headers)
    assert response.headers["content-type"] == "text/event-stream"
    assert [m["params"]["progress"] for m in response.messages[:-1]] == [0, 50, 100]
    assert response.messages[-1]["id"] == 1


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
