"""One request as raw ASGI bytes: its body and headers built by hand, and the app's status,
headers and body read back, so a test controls every byte that reaches the edge."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from presa_trio import AsgiApp
from support.asgi_scope import http_scope

V = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def body_of(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {"_meta": META, **(params or {})},
    }
    return json.dumps(message).encode()


def headers_of(method: str, **extra: str | bytes) -> list[tuple[bytes, bytes]]:
    found = [
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", V.encode()),
        (b"mcp-method", method.encode()),
    ]
    for name, value in extra.items():
        raw = value if isinstance(value, bytes) else value.encode("latin-1")
        found.append((name.replace("_", "-").encode(), raw))
    return found


async def asgi(
    app: AsgiApp, body: bytes, headers: list[tuple[bytes, bytes]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One raw exchange: the ``http.response.start`` message and the decoded JSON body."""
    sent: list[dict[str, Any]] = []
    pending = [body]

    async def receive() -> dict[str, Any]:
        if pending:
            await trio.lowlevel.checkpoint()
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        sent.append(dict(message))

    scope = http_scope(headers)
    with trio.fail_after(5):
        await app(scope, receive, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    return sent[0], json.loads(sent[1]["body"])
