"""Bad input over Streamable HTTP: every failure is the exact JSON-RPC error and HTTP status."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.asgi_scope import headers

from presa_trio import Server
from presa_trio.testing import Client, HttpResult, drive

V = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def discover(request_id: Any = 1, **params: Any) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "server/discover",
            "params": {"_meta": META, **params},
        }
    )


def error_of(result: HttpResult) -> dict[str, Any]:
    assert result.headers["content-type"] == "application/json"
    assert b"Traceback" not in result.body
    assert len(result.messages) == 1
    message = result.messages[0]
    assert message["jsonrpc"] == "2.0"
    assert "result" not in message
    error: dict[str, Any] = message["error"]
    return error


async def expect(
    client: Client,
    body: str | bytes,
    hdrs: list[tuple[str, str]],
    status: int,
    code: int,
    request_id: Any = None,
) -> dict[str, Any]:
    result = await drive(client.app, body, hdrs)
    assert result.status == status, result.body
    error = error_of(result)
    assert error["code"] == code
    if request_id is None:
        assert "id" not in result.messages[0]
    else:
        assert result.messages[0]["id"] == request_id
        assert type(result.messages[0]["id"]) is type(request_id)
    # The server keeps serving after every rejection.
    after = await drive(client.app, discover(), headers())
    assert after.status == 200 and after.response is not None and "result" in after.response
    return error


@pytest.mark.parametrize(
    ("body", "code", "request_id"),
    [
        ("{not json", -32700, None),
        (b"\xff\xfe", -32700, None),
        ("[]", -32600, None),
        (json.dumps([json.loads(discover())]), -32600, None),
        ("42", -32600, None),
        ('"text"', -32600, None),
        ("null", -32600, None),
        (json.dumps({"jsonrpc": "1.0", "id": 7, "method": "server/discover"}), -32600, 7),
        (json.dumps({"id": "s", "method": "server/discover"}), -32600, "s"),
        (json.dumps({"jsonrpc": "2.0", "id": 3, "result": {}}), -32600, 3),
        (json.dumps({"jsonrpc": "2.0", "id": 4, "error": {"code": 1, "message": "x"}}), -32600, 4),
        (json.dumps({"jsonrpc": "2.0", "id": None, "method": "server/discover"}), -32600, None),
        (json.dumps({"jsonrpc": "2.0", "id": 1.5, "method": "server/discover"}), -32600, None),
        (json.dumps({"jsonrpc": "2.0", "id": True, "method": "server/discover"}), -32600, None),
        (json.dumps({"jsonrpc": "2.0", "id": 5, "method": 12}), -32600, 5),
    ],
)
async def test_envelope_errors(client: Client, body: str, code: int, request_id: Any) -> None:
    await expect(client, body, headers(), 400, code, request_id)


@pytest.mark.parametrize(
    ("params", "request_id"),
    [
        ({}, 101),
        ({"_meta": "nope"}, 102),
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}, "a"),
        ({"_meta": {"io.modelcontextprotocol/protocolVersion": V}}, 104),
        ({"_meta": {**META, "io.modelcontextprotocol/protocolVersion": 2026}}, 105),
        ({"_meta": {**META, "io.modelcontextprotocol/clientCapabilities": []}}, 106),
        ({"_meta": {**META, "io.modelcontextprotocol/logLevel": "loud"}}, 107),
        ({"_meta": {**META, "progressToken": 1.5}}, 108),
    ],
)
async def test_missing_or_malformed_meta(
    client: Client, params: dict[str, Any], request_id: Any
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "server/discover", "params": params}
    )
    await expect(client, body, headers(), 400, -32602, request_id)


async def test_params_absent_or_not_an_object(client: Client) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover"})
    await expect(client, body, headers(), 400, -32602, 1)
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": [1]})
    await expect(client, body, headers(), 400, -32602, 2)


async def test_client_info_is_optional(client: Client) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": META}}
    )
    result = await drive(client.app, body, headers())
    assert result.status == 200
    assert result.response is not None and result.response["result"]["resultType"] == "complete"


async def test_schema_invalid_client_info_is_invalid_params(client: Client) -> None:
    # The schema types clientInfo as an Implementation; a schema-validating server says so.
    meta = {**META, "io.modelcontextprotocol/clientInfo": {"name": "no version"}}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": meta}}
    )
    error = await expect(client, body, headers(), 400, -32602, 9)
    assert error["data"] == {"pointer": "/params/_meta/io.modelcontextprotocol~1clientInfo"}


async def test_unsupported_version(client: Client) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 301, "method": "server/discover", "params": {"_meta": meta}}
    )
    hdrs = [h if h[0] != "mcp-protocol-version" else (h[0], "v999.0.0") for h in headers()]
    error = await expect(client, body, hdrs, 400, -32022, 301)
    assert error["data"] == {"supported": [V], "requested": "v999.0.0"}


async def test_version_header_body_mismatch_wins_over_unsupported(client: Client) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 302, "method": "server/discover", "params": {"_meta": meta}}
    )
    await expect(client, body, headers(), 400, -32020, 302)


async def test_missing_meta_wins_over_header_mismatch(client: Client) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {}}}
    )
    await expect(client, body, headers(), 400, -32602, 1)


@pytest.mark.parametrize(
    "hdrs",
    [
        [h for h in headers() if h[0] != "mcp-protocol-version"],
        [h for h in headers() if h[0] != "mcp-method"],
        [h if h[0] != "mcp-method" else ("mcp-method", "tools/list") for h in headers()],
        [h if h[0] != "mcp-method" else ("mcp-method", "SERVER/DISCOVER") for h in headers()],
        [*headers(), ("mcp-method", "server/discover")],
        [*headers(), ("MCP-Protocol-Version", V)],
        [h if h[0] != "mcp-method" else ("mcp-method", "server/discover\x80") for h in headers()],
    ],
    ids=[
        "no-version",
        "no-method",
        "other-method",
        "upper-case-value",
        "repeated-method",
        "repeated-version",
        "non-ascii",
    ],
)
async def test_routing_header_failures(client: Client, hdrs: list[tuple[str, str]]) -> None:
    await expect(client, discover(11), hdrs, 400, -32020, 11)


async def test_header_names_are_case_insensitive_and_values_trimmed(client: Client) -> None:
    hdrs = [("MCP-PROTOCOL-VERSION", f"  {V}\t"), ("Mcp-Method", " server/discover ")]
    result = await drive(client.app, discover(), hdrs)
    assert result.status == 200


def call(name: str, request_id: int = 1, **params: Any) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "_meta": META, **params},
        }
    )


@pytest.mark.parametrize(
    ("name_header", "status", "code"),
    [
        (None, 400, -32020),
        ("wrong_tool", 400, -32020),
        ("=?base64?dGVzdF9zaW1wbGVfdGV4dA==?=", 200, None),
        ("=?base64?dGVzdF9zaW1wbGVfdGV4dA=?=", 400, -32020),
        ("=?base64?dGVzd!!!9zaW1wbGVfdGV4dA==?=", 400, -32020),
        ("=?base64?/w==?=", 400, -32020),
        ("  test_simple_text  ", 200, None),
    ],
)
async def test_mcp_name(
    client: Client, name_header: str | None, status: int, code: int | None
) -> None:
    hdrs = headers("tools/call")
    if name_header is not None:
        hdrs.append(("mcp-name", name_header))
    if code is None:
        result = await drive(client.app, call("test_simple_text"), hdrs)
        assert result.status == status
        assert result.response is not None and "result" in result.response
    else:
        await expect(client, call("test_simple_text"), hdrs, status, code, 1)


async def test_repeated_mcp_name(client: Client) -> None:
    hdrs = [
        *headers("tools/call"),
        ("mcp-name", "test_simple_text"),
        ("Mcp-Name", "test_simple_text"),
    ]
    await expect(client, call("test_simple_text"), hdrs, 400, -32020, 1)


@pytest.mark.parametrize(
    ("region", "header", "ok"),
    [
        ("Hello", "=?base64?SGVsbG8=?=", True),
        ("Hello", "=?base64?SGVsbG8?=", False),
        ("Hello", "=?base64?SGVs!!!bG8=?=", False),
        ("SGVsbG8=", "SGVsbG8=", True),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8=", True),
        ("test-value", None, False),
        ("Zürich", "=?base64?WsO8cmljaA==?=", True),
        ("Hello", "Goodbye", False),
    ],
)
async def test_mcp_param_headers(client: Client, region: str, header: str | None, ok: bool) -> None:
    hdrs = [*headers("tools/call"), ("mcp-name", "test_header_param")]
    if header is not None:
        hdrs.append(("Mcp-Param-Region", header))
    body = call("test_header_param", arguments={"region": region})
    if ok:
        result = await drive(client.app, body, hdrs)
        assert result.status == 200
        assert result.response is not None
        assert result.response["result"]["content"][0]["text"] == f"region={region}"
    else:
        await expect(client, body, hdrs, 400, -32020, 1)


async def test_mcp_param_header_without_body_value(client: Client) -> None:
    hdrs = [*headers("tools/call"), ("mcp-name", "test_header_param"), ("mcp-param-region", "x")]
    await expect(client, call("test_header_param", arguments={}), hdrs, 400, -32020, 1)


@pytest.mark.parametrize(
    "method",
    [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "unknown/method",
    ],
)
async def test_unknown_and_removed_methods(client: Client, method: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 500, "method": method, "params": {"_meta": META}})
    await expect(client, body, headers(method), 404, -32601, 500)


async def test_unknown_tool_and_bad_params(client: Client) -> None:
    hdrs = [*headers("tools/call"), ("mcp-name", "nope")]
    error = await expect(client, call("nope"), hdrs, 400, -32602, 1)
    assert "nope" in error["message"]
    hdrs = [*headers("tools/call"), ("mcp-name", "test_simple_text")]
    await expect(client, call("test_simple_text", arguments=[1, 2]), hdrs, 400, -32602, 1)


async def test_oversized_body_is_refused_without_reading_on(fixture_server: Server) -> None:
    app = fixture_server.asgi_app(max_body=1024)
    async with app.lifespan():
        result = await drive(app, discover(1, padding="x" * 2000), headers())
    assert result.status == 413
    assert error_of(result)["code"] == -32600


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("evil.example.com", "http://evil.example.com"),
        ("evil.example.com", None),
        ("127.0.0.1:8000", "http://evil.example.com"),
        ("127.0.0.1:8000", "file://x"),
    ],
)
async def test_dns_rebinding(client: Client, host: str, origin: str | None) -> None:
    hdrs = [*headers(), ("host", host)]
    if origin is not None:
        hdrs.append(("origin", origin))
    result = await drive(client.app, discover(), hdrs)
    assert result.status == 403
    assert error_of(result)["code"] == -32600


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("localhost:3000", "http://localhost:3000"),
        ("[::1]:80", "http://[::1]"),
        ("127.0.0.1", "null"),
    ],
)
async def test_loopback_names_are_admitted(client: Client, host: str, origin: str) -> None:
    result = await drive(client.app, discover(), [*headers(), ("host", host), ("origin", origin)])
    assert result.status == 200


@pytest.mark.parametrize("verb", ["GET", "DELETE", "PUT"])
async def test_only_post(client: Client, verb: str) -> None:
    result = await drive(client.app, b"", headers(), method=verb)
    assert result.status == 405
    assert result.headers["allow"] == "POST"


async def test_other_paths_are_404(client: Client) -> None:
    result = await drive(client.app, discover(), headers(), path="/other")
    assert result.status == 404


async def test_notification_is_accepted_with_202(client: Client) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    )
    result = await drive(client.app, body, [])
    assert (result.status, result.body) == (202, b"")
