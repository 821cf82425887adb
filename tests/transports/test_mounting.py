"""An app mounted under a prefix (Starlette's ``Mount("/deploy", app)`` and the like pass the
full path with the mount point as ``root_path``) serves its own path below the prefix."""

from __future__ import annotations

import json

import pytest
from support.asgi_scope import exchange

from presa_trio import Server
from presa_trio.testing import Client


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
        answered, _ = await exchange(
            app, client.headers_for(message), body, path=path, root_path=root_path
        )
        assert answered == status
