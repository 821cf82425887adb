"""A server with the Tasks extension for the 2025-11-25 session tests: tools that run as
tasks (quickly, until cancelled, asking the client, failing) and one that never does. The
principal is the ``Mcp-Tenant`` header (``nobody`` without it). Served by hypercorn (``app``,
its store from PRESA_STORE) and built in process (``build``)."""

from __future__ import annotations

import os
from typing import Any

import trio

from presa_trio import Context, Server, Validation
from presa_trio.errors import InternalError
from presa_trio.ext.tasks import TasksExtension, TaskStore
from presa_trio.mrtr import elicit

NAME = elicit("What is your name?", {"name": {"type": "string"}}, ["name"])


def tenant(ctx: Context) -> str:
    return (ctx.headers.get("mcp-tenant") if ctx.headers else None) or "nobody"


def build(*, page_size: int = 50, store: TaskStore | None = None, **options: Any) -> Server:
    server = Server(
        "legacy-tasks",
        "1",
        validation=Validation(outbound=True),
        loop_warning=None,
        principal=tenant,
        **options,
    )
    server.add_extension(
        TasksExtension(list_page_size=page_size, require_name_header=False, store=store)
    )

    @server.tool(options={"tasks": "optional"})
    def add(a: int, b: int) -> int:
        """Adds, as a task when asked to."""
        return a + b

    @server.tool(options={"tasks": "required"})
    async def sleeper() -> str:
        """Runs until cancelled (an hour at most)."""
        await trio.sleep(3600)
        return "woke"

    @server.tool(options={"tasks": "required"})
    async def greet(ctx: Context) -> str:
        """Asks for a name by elicitation, then greets it; says where it ran."""
        answer = (await ctx.input({"name": NAME}))["name"]
        name = (answer.get("content") or {}).get("name", "stranger")
        return f"Hello, {name}! pid={os.getpid()}"

    @server.tool(options={"tasks": "optional"})
    def boom() -> str:
        """Fails with -32603."""
        raise InternalError("boom")

    @server.tool(options={"tasks": "optional"})
    def whoami() -> int:
        """The process that ran this call."""
        return os.getpid()

    @server.tool()
    def plain() -> str:
        """Never a task."""
        return "plain"

    return server


server = build(backend=os.environ.get("PRESA_STORE") or None, page_size=2)
app = server.asgi_app()
