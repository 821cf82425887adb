"""``Server(lifespan=...)``: entered by every run before anything is served, left after
everything stopped (tasks included); what it yields is ``ctx.lifespan``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio import Context, Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import open_client

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def build(log: list[str]) -> Server:
    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[dict[str, Any]]:
        pool = {"name": f"pool of {server.name}", "open": True}
        log.append("opened")
        await trio.lowlevel.checkpoint()
        try:
            yield {"pool": pool}
        finally:
            pool["open"] = False
            log.append("closed")

    server = Server("held", lifespan=lifespan)
    server.add_extension(TasksExtension())

    @server.tool()
    async def pool_name(ctx: Context) -> str:
        """The pool the lifespan opened."""
        await trio.lowlevel.checkpoint()
        return str(ctx.lifespan["pool"]["name"])

    @server.tool()
    def pool_open(ctx: Context) -> bool:
        """Whether the pool is open (from a worker thread)."""
        return bool(ctx.lifespan["pool"]["open"])

    @server.tool(options={"tasks": "required"})
    async def long_job(ctx: Context) -> str:
        """Runs until the server stops; its cleanup still finds the pool open."""
        try:
            await trio.sleep(3600)
        finally:
            log.append(f"task cleanup, pool open: {ctx.lifespan['pool']['open']}")
        return "done"

    return server


async def test_handlers_see_what_the_lifespan_yielded() -> None:
    log: list[str] = []
    server = build(log)
    async with open_client(server, capabilities=TASKS) as client:
        assert log == ["opened"]
        assert (await client.call_tool("pool_name", {}))["content"][0]["text"] == "pool of held"
        assert (await client.call_tool("pool_open", {}))["content"][0]["text"] == "true"
        await client.create_task("long_job")
        await trio.testing.wait_all_tasks_blocked()
    assert log == ["opened", "task cleanup, pool open: True", "closed"]
    async with open_client(server, capabilities=TASKS) as client:  # every run its own
        assert (await client.call_tool("pool_open", {}))["content"][0]["text"] == "true"
    assert log[-2:] == ["opened", "closed"]


async def test_without_a_lifespan_it_is_none() -> None:
    server = Server("plain")

    @server.tool()
    async def state(ctx: Context) -> str:
        """What ctx.lifespan is."""
        await trio.lowlevel.checkpoint()
        return repr(ctx.lifespan)

    async with open_client(server) as client:
        assert (await client.call_tool("state", {}))["content"][0]["text"] == "None"


async def test_a_lifespan_that_fails_fails_the_startup() -> None:
    @asynccontextmanager
    async def broken(server: Server) -> AsyncIterator[None]:
        await trio.lowlevel.checkpoint()
        raise OSError("the database is not there")
        yield  # pragma: no cover

    server = Server("broken", lifespan=broken)
    with pytest.raises(OSError, match="the database is not there"):
        async with server.open_runtime():
            pass  # pragma: no cover
