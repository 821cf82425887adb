"""The server the end-to-end tests run under a real hypercorn trio worker.

It serves a few tools that let a test observe the server from outside: the subscription
bus's counts, cancellations seen, and change triggers.
"""

from __future__ import annotations

import trio

from presa_trio import Context, Server, Validation

server = Server("e2e", "1.0", validation=Validation(outbound=True))
seen = {"cancelled": 0, "started": 0}


@server.tool()
def bus_stats(ctx: Context) -> dict[str, int]:
    """The subscription bus's open listeners (this run's)."""
    return {"listeners": ctx.runtime.bus.listener_count}


@server.tool()
def cancellations() -> dict[str, int]:
    """How many sleepers started and how many were cancelled."""
    return dict(seen)


@server.tool()
async def sleeper(ctx: Context) -> str:
    """Sleeps until its client goes away."""
    seen["started"] += 1
    try:
        await ctx.progress(1)
        await trio.sleep(60)
    except trio.Cancelled:
        seen["cancelled"] += 1
        raise
    return "woke"


@server.tool()
def change_tools() -> int:
    """Announce a tool-list change; returns how many listeners got it."""
    return server.notify_tools_changed()


@server.tool()
def touch(uri: str) -> int:
    """Announce an update of ``uri``; returns how many listeners got it."""
    return server.notify_resource_updated(uri)


@server.resource("test://a", name="a", mime_type="text/plain")
def resource_a() -> str:
    return "a"


@server.resource("test://b", name="b", mime_type="text/plain")
def resource_b() -> str:
    return "b"


app = server.asgi_app()
