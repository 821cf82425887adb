"""FastMCP (``fastmcp`` 4 with ``fastmcp-tasks``) serving the peers benchmark's tools.

Served by ``bench/peers.py`` under hypercorn; not imported by the library. Its tools are the
ones the other peers serve: ``test_simple_text`` (plain text), and in ``tasks_app`` also
``quick`` (a task if asked, answers at once) and ``park`` (a task that asks its client one
question, FastMCP's way: its run returns the question and ends, and the task is run again
with the answer), on FastMCP's own store, Docket's in-memory backend (``memory://``, its
default).

``tasks_app`` runs only under hypercorn's asyncio worker: Docket, which runs FastMCP's tasks,
is written for asyncio (it asks for asyncio's running loop when it opens its store and starts
its worker with ``asyncio.create_task``), so under the trio worker its lifespan fails and the
app never starts. ``app``, without tasks, runs under the trio worker as the other peers do.
"""

from __future__ import annotations

from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

QUESTION = ElicitRequest(
    params=ElicitRequestFormParams(
        message="Value?",
        requested_schema={"type": "object", "properties": {"v": {"type": "string"}}},
    )
)


def build(tasks: bool) -> FastMCP:
    server = FastMCP("fastmcp-peer")

    @server.tool(output_schema=None)  # plain text content, as the other peers answer
    def test_simple_text() -> str:
        """Returns a simple text content block."""
        return "This is a simple text response for testing."

    if not tasks:
        return server
    server.add_extension(TasksExtension(url="memory://"))

    @server.tool(task=True)
    async def quick() -> str:
        """Answers at once; a task when the client asks for one."""
        return "done"

    @server.tool(task=True, output_schema=None)
    async def park(ctx: Context) -> str | InputRequiredResult:
        """Asks the client one question; answers once the task re-runs with the answer.
        (FastMCP's way for a task: ``ctx.elicit`` is refused in a background task, and a
        task that waits for input ends its run and is re-run when the answer comes.)"""
        if ctx.input_responses is None:
            return InputRequiredResult(input_requests={"value": QUESTION})
        return "answered"

    return server


app = build(tasks=False).http_app()
tasks_app = build(tasks=True).http_app()
