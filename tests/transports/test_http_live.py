"""Streamable HTTP against a real hypercorn trio worker on 127.0.0.1: discovery, bad input and
progress over SSE, over a socket."""

from __future__ import annotations

import json

import pytest
from support.live_http import call, mcp_request, request

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
