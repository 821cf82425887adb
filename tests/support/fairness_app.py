"""The server of the fairness end-to-end test: bearer tokens looked up in a table (an
opaque-token verifier, as a deployment with its own token service writes one), so that two
principals exist, and a bound on listen streams small enough for a test to fill."""

from __future__ import annotations

import trio

from presa_trio import Context, Limits, Server
from presa_trio.auth import AccessToken, BearerAuth

TOKENS = {"token-alice": "alice", "token-bob": "bob"}


class TokenTable:
    async def verify(self, token: str) -> AccessToken | None:
        await trio.lowlevel.checkpoint()
        subject = TOKENS.get(token)
        return AccessToken(subject=subject) if subject is not None else None


auth = BearerAuth(
    TokenTable(),
    resource="https://mcp.example.com/mcp",
    authorization_servers=["https://auth.example.com"],
)
server = Server(
    "fairness-e2e", "1", auth=auth, limits=Limits(max_listeners=5, max_listeners_per_principal=3)
)


@server.tool()
def announce(ctx: Context) -> str:
    """Tell every listener that the tool list changed."""
    return f"{ctx.runtime.notify_tools_changed()} streams told"


app = server.asgi_app()
