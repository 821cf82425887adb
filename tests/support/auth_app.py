"""The server of the authorization end-to-end test: bearer tokens checked by ``JwtVerifier``
against keys it fetches over HTTP from ``/jwks.json``, which this same process serves on
127.0.0.1 (the test hands it the public key set in ``PRESA_AUTH_JWKS``)."""

from __future__ import annotations

import os
from typing import Any

from presa_trio import Context, Server
from presa_trio.auth import BearerAuth, JwtVerifier

BASE = f"http://127.0.0.1:{os.environ['PRESA_AUTH_PORT']}"
JWKS = os.environ["PRESA_AUTH_JWKS"].encode()
ISSUER = "https://auth.example.com"

verifier = JwtVerifier(jwks_url=f"{BASE}/jwks.json", issuer=ISSUER)
auth = BearerAuth(
    verifier,
    resource=f"{BASE}/mcp",
    authorization_servers=[ISSUER],
    scopes_supported=["read", "deploy"],
)
server = Server("auth-e2e", "1", auth=auth)


@server.tool()
def whoami(ctx: Context) -> str:
    """Who is asking."""
    return ctx.principal


@server.tool(scopes=["deploy"])
def deploy(ctx: Context) -> str:
    """Needs the deploy scope."""
    return f"deployed by {ctx.principal}"


mcp = server.asgi_app()


async def app(scope: Any, receive: Any, send: Any) -> None:
    """The MCP app, and beside it the authorization server's key set."""
    if scope["type"] == "http" and scope["path"] == "/jwks.json":
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": JWKS})
        return
    await mcp(scope, receive, send)
