"""A server that cannot start: its lifespan fails (a database that is not there, say)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from presa_trio import Server


@asynccontextmanager
async def lifespan(server: Server) -> AsyncIterator[None]:
    raise RuntimeError("the database is not there")
    yield


server = Server("failing", "1.0", lifespan=lifespan)


@server.tool()
def hello() -> str:
    return "hi"
