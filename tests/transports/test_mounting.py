"""An app mounted under a prefix (Starlette's ``Mount("/deploy", app)`` and the like pass the
full path with the mount point as ``root_path``) serves its own path below the prefix."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from presa_trio import Server
from presa_trio.testing import Client


async def exchange(app: Any, path: str, root_path: str, body: bytes, headers: Any) -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
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

    await app(scope, receive, send)
    status: int = sent[0]["status"]
    return status


@pytest.mark.parametrize(
    ("path", "root_path", "status"),
    [
        ("/mcp", "", 200),
        ("/deploy/mcp", "/deploy", 200),
        ("/deploy/mcp", "/deploy/", 404),  # a root path is a prefix of whole segments
        ("/deployed/mcp", "/deploy", 404),
        ("/deploy/mcp", "", 404),
        ("/mcp", "/deploy", 200),  # a host that already stripped its prefix
    ],
)
async def test_the_path_is_matched_below_the_mount_point(
    path: str, root_path: str, status: int
) -> None:
    server = Server("mounted")
    app = server.asgi_app()
    async with app.lifespan():
        client = Client(app)
        message = client.message("server/discover")
        body = json.dumps(message).encode()
        assert await exchange(app, path, root_path, body, client.headers_for(message)) == status
