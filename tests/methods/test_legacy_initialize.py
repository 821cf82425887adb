"""``Server(legacy=False)``: a client of an older protocol version learns the versions this
server supports (over HTTP and over stdio); in the new dialect ``initialize`` is an unknown
method. (A server that serves the older era opens a session instead: tests/sessions.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import trio
import trio.testing
from support.answers import only_error, still_serving
from support.asgi_scope import headers

from fixtures.conformance import build_server
from presa_trio import serve_stdio
from presa_trio.testing import Client, drive, open_client

V = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
}
LEGACY_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "old-client", "version": "1.0"},
}
PLAIN = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]


@pytest.fixture
async def modern_only() -> AsyncIterator[Client]:
    async with open_client(build_server(legacy=False)) as client:
        yield client


def legacy_initialize(params: Mapping[str, Any] | None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    if params is not None:
        message["params"] = dict(params)
    return json.dumps(message)


@pytest.mark.parametrize(
    ("params", "extra_headers", "requested"),
    [
        (LEGACY_PARAMS, [], "2025-11-25"),
        (LEGACY_PARAMS, [("mcp-protocol-version", "2025-11-25")], "2025-11-25"),
        (None, [("mcp-protocol-version", "2025-06-18")], "2025-06-18"),
        ({**LEGACY_PARAMS, "protocolVersion": "2024-11-05"}, [], "2024-11-05"),
        (
            {**LEGACY_PARAMS, "protocolVersion": "2024-11-05"},
            [("mcp-protocol-version", "2025-06-18")],
            "2024-11-05",  # the params' version wins over the header's
        ),
        (None, [], "unknown"),
        ({"capabilities": {}}, [], "unknown"),
    ],
    ids=["no-header", "header", "header-no-params", "old", "both", "nothing", "no-version"],
)
async def test_legacy_initialize_learns_the_supported_versions(
    modern_only: Client,
    params: Mapping[str, Any] | None,
    extra_headers: list[tuple[str, str]],
    requested: str,
) -> None:
    app = modern_only.app
    result = await drive(app, legacy_initialize(params), PLAIN + extra_headers)
    assert result.status == 400, result.body
    error = only_error(result)
    assert result.messages[0]["id"] == 1
    assert error["code"] == -32022
    assert error["data"] == {"supported": [V], "requested": requested}
    await still_serving(app)


async def test_initialize_in_the_new_dialect_is_an_unknown_method(client: Client) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"_meta": META}}
    )
    result = await drive(client.app, body, headers("initialize"))
    assert result.status == 404
    error = only_error(result)
    assert result.messages[0]["id"] == 5
    assert error == {"code": -32601, "message": "Method not found: initialize"}


async def test_legacy_initialize_over_stdio() -> None:
    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    server_out, from_server = trio.testing.memory_stream_one_way_pair()

    async def run() -> None:
        await serve_stdio(build_server(legacy=False), stdin=server_in, stdout=server_out)
        await server_out.aclose()

    async def line() -> dict[str, Any]:
        buffer = b""
        while not buffer.endswith(b"\n"):
            buffer += await from_server.receive_some(1)
        message: dict[str, Any] = json.loads(buffer)
        return message

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await to_server.send_all(legacy_initialize(LEGACY_PARAMS).encode() + b"\n")
            assert await line() == {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {
                    "code": -32022,
                    "message": "Unsupported protocol version",
                    "data": {"supported": [V], "requested": "2025-11-25"},
                },
            }
            await to_server.send_all(legacy_initialize(None).encode() + b"\n")
            assert (await line())["error"]["data"] == {"supported": [V], "requested": "unknown"}
            await to_server.aclose()
