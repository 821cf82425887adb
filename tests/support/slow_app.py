"""The server the slow-client harness (``test_slow_clients.py``) runs under hypercorn.

Its tools let a test make the server hold something on a client's behalf (a large result, a
streamed response, listen streams) and observe the process from outside. ``app`` has short
deadlines so that every bound the harness checks is a matter of seconds.
"""

from __future__ import annotations

import trio

from presa_trio import Context, Server, Timeouts

BODY_TIMEOUT = 2.0
WRITE_TIMEOUT = 2.0

server = Server("slow", "1.0")


@server.tool(thread=False)
def echo(text: str) -> str:
    """Answer ``text``."""
    return text


@server.tool(thread=False)
def big(n: int) -> str:
    """A text of ``n`` bytes."""
    return "x" * n


@server.tool()
async def steps(ctx: Context) -> str:
    """Report progress once (an SSE response when a progressToken was sent), then answer."""
    await ctx.progress(1, 2)
    return "done"


@server.tool()
async def nap(seconds: float) -> str:
    """Sleep ``seconds``, then answer (a slow tool; the client sends nothing meanwhile)."""
    await trio.sleep(seconds)
    return f"rested {seconds:g}"


@server.tool(thread=False)
def announce(times: int = 1) -> int:
    """Announce ``times`` tool-list changes at once; how many deliveries the bus counted."""
    return sum(server.notify_tools_changed() for _ in range(times))


@server.tool(thread=False)
def touch_many(n: int, first: int = 0) -> int:
    """Announce updates of ``n`` distinct resources ``test://r/{i}`` at once (no checkpoint
    in between, so a listener cannot read while they are published)."""
    return sum(server.notify_resource_updated(f"test://r/{i}") for i in range(first, first + n))


@server.tool(thread=False)
def stats(ctx: Context) -> dict[str, int]:
    """The open listen streams of this run."""
    return {"listeners": ctx.runtime.bus.listener_count}


@server.resource("test://r", name="r", mime_type="text/plain")
def resource_r() -> str:
    return "r"


app = server.asgi_app(timeouts=Timeouts(body=BODY_TIMEOUT, write=WRITE_TIMEOUT))
