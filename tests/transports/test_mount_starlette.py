"""Mounted in a Starlette app, as the mounting guide (docs/guides/mounting.md) shows:
``Mount("/deploy", app=mcp_app)`` with the host's lifespan running the server (Starlette's own
test client, on trio)."""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from presa_trio import Server
from presa_trio.testing import Client


def test_mounted_under_a_prefix_with_the_host_lifespan() -> None:
    server = Server("mounted")

    @server.tool()
    def hello(name: str) -> str:
        """Greets."""
        return f"hello {name}"

    mcp_app = server.asgi_app()
    host = Starlette(routes=[Mount("/deploy", app=mcp_app)], lifespan=mcp_app.host_lifespan)
    message = Client(mcp_app).message("tools/call", {"name": "hello", "arguments": {"name": "x"}})
    headers = dict(Client(mcp_app).headers_for(message))
    headers["host"] = "localhost"
    with TestClient(host, backend="trio", base_url="http://localhost") as client:
        answer = client.post("/deploy/mcp", content=json.dumps(message), headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["content"] == [{"type": "text", "text": "hello x"}]
        assert client.post("/mcp", content=json.dumps(message), headers=headers).status_code == 404
