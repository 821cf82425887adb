"""Header injection: a CR LF smuggled into a routing header, plain or base64, is never reflected
into a response header, and where it matches the body it only ever appears JSON-escaped."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from support.raw_asgi import asgi, body_of, headers_of

from fixtures.conformance import build_server

INJECTED = "x\r\nSet-Cookie: a=b"
INJECTED_B64 = "=?base64?" + base64.b64encode(INJECTED.encode()).decode() + "?="


def assert_clean_headers(start: dict[str, Any]) -> None:
    names = [name for name, _ in start["headers"]]
    assert sorted(names) == [b"content-length", b"content-type"]
    for name, value in start["headers"]:
        assert b"\r" not in name + value and b"\n" not in name + value
        assert b"set-cookie" not in name.lower() and b"a=b" not in value


@pytest.mark.parametrize(
    ("method", "params", "header", "expected"),
    [
        (
            "tools/call",
            {"name": "test_simple_text"},
            "mcp_name",
            f"Mcp-Name header {INJECTED!r} does not match 'test_simple_text'",
        ),
        (
            "resources/read",
            {"uri": "test://static-text"},
            "mcp_name",
            f"Mcp-Name header {INJECTED!r} does not match 'test://static-text'",
        ),
        (
            "tools/call",
            {"name": "test_header_param", "arguments": {"region": "eu"}},
            "mcp_param_region",
            "Mcp-Param-Region header does not match its argument",
        ),
    ],
)
async def test_crlf_in_a_base64_routing_header_is_never_reflected(
    method: str, params: dict[str, Any], header: str, expected: str
) -> None:
    app = build_server().asgi_app()
    hdrs = headers_of(method, **{header: INJECTED_B64})
    if header != "mcp_name":
        hdrs += [(b"mcp-name", params["name"].encode())]
    async with app.lifespan():
        start, body = await asgi(app, body_of(method, params), hdrs)
    assert start["status"] == 400
    assert body == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": expected}}
    assert_clean_headers(start)


async def test_crlf_matching_the_body_is_only_ever_json_escaped() -> None:
    """Header and body agree on a name holding CRLF: the unknown tool is named in the JSON
    body (escaped), never in a response header."""
    app = build_server().asgi_app()
    hdrs = headers_of("tools/call", mcp_name=INJECTED_B64)
    async with app.lifespan():
        start, body = await asgi(app, body_of("tools/call", {"name": INJECTED}), hdrs)
        raw_crlf = headers_of("tools/call", mcp_name=b"x\r\nSet-Cookie: a=b")
        start_raw, body_raw = await asgi(app, body_of("tools/call", {"name": "x"}), raw_crlf)
    assert start["status"] == 400
    assert body["error"] == {"code": -32602, "message": f"Unknown tool: {INJECTED}"}
    assert_clean_headers(start)
    assert start_raw["status"] == 400  # an unencoded CR/LF is refused outright
    assert body_raw["error"] == {
        "code": -32020,
        "message": "Header mcp-name has characters outside visible ASCII",
    }
    assert_clean_headers(start_raw)
