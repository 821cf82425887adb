"""Opening the backend a URL names, loading only what that backend needs: a server run on
``memory:`` never imports the SQL backend, SQLite or PostgreSQL.

What each URL means is ``presa_trio.backends``' docstring; this module only opens and checks.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .protocol import DEFAULT_URL, Backend, BackendError, MemoryBackend, parse_url

if TYPE_CHECKING:
    from .sql import SqlDatabase


@asynccontextmanager
async def open_backend(url: str | Backend | None = None) -> AsyncIterator[Backend]:
    """Open the backend ``url`` names (``memory:`` when None) for one run, and close it
    after. A ``Backend`` object is used as it is (its owner opens and closes it)."""
    if url is not None and not isinstance(url, str):
        await trio.lowlevel.checkpoint()
        yield url
        return
    parsed = parse_url(url or DEFAULT_URL)
    if parsed.scheme == "memory":
        await trio.lowlevel.checkpoint()
        yield MemoryBackend()
        return
    from .sql import DEFAULT_LEASE
    from .sqlite import BUSY_TIMEOUT, DEFAULT_POLL, open_sqlite

    lease = parsed.number("lease", DEFAULT_LEASE)
    timeout = parsed.number("timeout", BUSY_TIMEOUT)
    if parsed.scheme == "postgresql":
        open_postgres = _postgres().open_postgres
        async with open_postgres(parsed.path, lease=lease, statement_timeout=timeout) as backend:
            yield backend
        return
    poll = parsed.number("poll", DEFAULT_POLL)
    async with open_sqlite(parsed.path, lease=lease, poll=poll, busy_timeout=timeout) as shared:
        yield shared


@asynccontextmanager
async def open_database(url: str) -> AsyncIterator[SqlDatabase]:
    """The SQL database of the shared store ``url`` names, to run statements on, without
    joining its workers: no lease, no signals, nothing created or migrated (a tool that reads
    a running server's store, such as ``presa-trio tasks``). Raises ``BackendError`` for
    ``memory:`` (nothing outside the process to open), a SQLite file that is not there, or
    a database that cannot be reached."""
    from .sqlite import BUSY_TIMEOUT, SqliteDatabase

    parsed = parse_url(url)
    timeout = parsed.number("timeout", BUSY_TIMEOUT)
    if parsed.scheme == "memory":
        raise BackendError("memory: lives inside each server; name a sqlite or postgresql store")
    if parsed.scheme == "postgresql":
        db: Any = _postgres().PostgresDatabase(parsed.path, timeout)
        await db.open()
    else:
        if not await trio.to_thread.run_sync(os.path.isfile, parsed.path):
            raise BackendError(f"no sqlite store at {parsed.path}")
        db = SqliteDatabase(parsed.path, busy_timeout=timeout)
    try:
        yield db
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(timeout):
            await db.aclose()


def check_url(url: str) -> None:
    """Open and close the backend ``url`` names, in this thread, or raise ``BackendError``:
    what a command line does before it accepts anything."""
    from .sqlite import BUSY_TIMEOUT, check_file

    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        check_file(parsed.path)
    elif parsed.scheme == "postgresql":
        _postgres().check_database(parsed.path, parsed.number("timeout", BUSY_TIMEOUT))


def _postgres() -> Any:
    """The PostgreSQL backend's module; psycopg is an optional dependency."""
    try:
        from . import postgres as module
    except ImportError:
        raise BackendError(
            "the postgresql store needs psycopg: pip install 'presa_trio[postgres]'"
        ) from None
    return module
