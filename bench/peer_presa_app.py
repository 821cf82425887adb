"""presa_trio serving the peers benchmark's tools, with the library's defaults.

Served by ``bench/peers.py`` under hypercorn's trio worker; not imported by the library. Its
tools are the ones the other peers serve: ``test_simple_text`` (plain text), ``quick`` (a
task if asked, answers at once) and ``park`` (a task that asks its client one question).
Tasks live on the memory backend, with no quotas (the bench measures speed, not limits);
sessions of the older era are on, as by default (resumable streams included).
"""

from __future__ import annotations

import trio

from presa_trio import Context, Server
from presa_trio.ext.tasks import TaskLimits, TasksExtension
from presa_trio.mrtr import elicit

TASK = {"tasks": "optional"}
QUESTION = elicit("Value?", {"v": {"type": "string"}}, ["v"])

server = Server("presa-peer", "1", loop_warning=None)
server.add_extension(
    TasksExtension(
        limits=TaskLimits(
            max_tasks=None,
            max_stored_per_principal=None,
            max_active_per_principal=None,
            max_stored_bytes=None,
        )
    )
)


@server.tool(thread=False, structured_output=False)  # plain text, as the other peers answer
def test_simple_text() -> str:
    """Returns a simple text content block."""
    return "This is a simple text response for testing."


@server.tool(options=TASK)
async def quick() -> str:
    """Answers at once (one checkpoint, as any async tool makes)."""
    await trio.lowlevel.checkpoint()
    return "done"


@server.tool(options=TASK)
async def park(ctx: Context) -> str:
    """Asks the client one question and waits for the answer."""
    answer = await ctx.input({"value": QUESTION})
    return str(answer["value"])


app = server.asgi_app()
