"""Raw ASGI for the tests that drive an app by hand: the request headers an MCP client
sends, an HTTP scope, and one POST exchange that reads the answer's start."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

V = "2026-07-28"


def headers(method: str = "server/discover", **extra: str) -> list[tuple[str, str]]:
    """A client's routing headers for ``method`` (``mcp_name="x"`` adds ``Mcp-Name: x``)."""
    found = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", V),
        ("mcp-method", method),
    ]
    found += [(k.replace("_", "-"), v) for k, v in extra.items()]
    return found


def http_scope(
    raw_headers: Sequence[tuple[bytes, bytes]],
    *,
    method: str = "POST",
    path: str = "/mcp",
    root_path: str = "",
) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": list(raw_headers),
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def exchange(
    app: Any,
    text_headers: Sequence[tuple[str, str]],
    body: bytes = b"",
    **scope: Any,
) -> tuple[int, dict[bytes, bytes]]:
    """One request by a client that waits for its answer: its status and headers."""
    raw = [(k.encode(), v.encode()) for k, v in text_headers]
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await trio.sleep_forever()  # a client that waits for its answer

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(http_scope(raw, **scope), receive, send)
    return sent[0]["status"], dict(sent[0]["headers"])
