"""Opening the backend a URL names, loading only what that backend needs: a server run on
``memory:`` never imports the SQL backend, SQLite or PostgreSQL.

What each URL means is ``presa_trio.backends``' docstring; this module only opens and checks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from .protocol import DEFAULT_URL, Backend, BackendError, MemoryBackend, parse_url


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
