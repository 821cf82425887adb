"""Backends: where the workers of one server share their state, named by one URL.

``memory:`` (the default) is this process only; ``sqlite:///ABSOLUTE/PATH.db`` is every
worker process of one host, durable across restarts; ``postgresql://USER@HOST:PORT/DB`` (any
libpq URL; the password from the URL or the usual ``PG*`` variables) is every instance on
every host that reaches the database. Options go in the URL's query: ``lease`` (seconds a
worker may go silent before its tasks fail, default 20) and ``timeout`` (seconds a statement
may take or wait for a lock, default 5) for both, ``poll`` (seconds between looks for other
workers' signals while some are expected, default 0.01) for SQLite. Pass the URL as
``Server(backend=...)``, ``server.asgi_app(backend=...)`` or
``server.open_runtime(backend=...)``; ``presa-trio serve`` takes ``--store URL`` (default:
the ``PRESA_STORE`` environment variable).

Extensions reach the run's backend as ``ExtensionContext.backend``; a store for a shared
backend runs its statements on ``SharedBackend.db`` (a ``SqlDatabase``). Whether the
backend works now is ``Runtime.backend_health()`` (a ``BackendHealth``): a shared backend's
heartbeat and signal loop retry what fails, with backoff, and report it there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from ._backend import DEFAULT_URL as DEFAULT_URL
from ._backend import ENVIRONMENT_VARIABLE as ENVIRONMENT_VARIABLE
from ._backend import Backend as Backend
from ._backend import BackendError as BackendError
from ._backend import BackendHealth as BackendHealth
from ._backend import BackendUrl as BackendUrl
from ._backend import MemoryBackend as MemoryBackend
from ._backend import parse_url as parse_url
from ._shared import DEFAULT_LEASE
from ._shared import Connection as Connection
from ._shared import SharedBackend as SharedBackend
from ._shared import SqlDatabase as SqlDatabase
from ._shared import StorageUnavailable as StorageUnavailable
from ._sqlite import BUSY_TIMEOUT, DEFAULT_POLL, check_file, open_sqlite
from ._sqlite import SqliteDatabase as SqliteDatabase

__all__ = [
    "DEFAULT_URL",
    "ENVIRONMENT_VARIABLE",
    "Backend",
    "BackendError",
    "BackendHealth",
    "BackendUrl",
    "Connection",
    "MemoryBackend",
    "SharedBackend",
    "SqlDatabase",
    "SqliteDatabase",
    "StorageUnavailable",
    "check_url",
    "open_backend",
    "parse_url",
]


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
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        check_file(parsed.path)
    elif parsed.scheme == "postgresql":
        _postgres().check_database(parsed.path, parsed.number("timeout", BUSY_TIMEOUT))


def _postgres() -> Any:
    """The PostgreSQL backend's module; psycopg is an optional dependency."""
    try:
        from . import _postgres as module
    except ImportError:
        raise BackendError(
            "the postgresql store needs psycopg: pip install 'presa_trio[postgres]'"
        ) from None
    return module
