"""Backends: where the workers of one server share their state, named by one URL.

``memory:`` (the default) is this process only; ``sqlite:///ABSOLUTE/PATH.db`` is every
worker process of one host, durable across restarts. A sqlite URL takes options as its
query: ``lease`` (seconds a worker may go silent before its tasks fail, default 20),
``poll`` (seconds between looks for other workers' signals, default 0.01) and ``timeout``
(seconds a statement waits for another writer's lock, default 5). Pass the URL as
``Server(backend=...)``, ``server.asgi_app(backend=...)`` or
``server.open_runtime(backend=...)``; ``presa-trio serve`` takes ``--store URL`` (default:
the ``PRESA_STORE`` environment variable).

Extensions reach the run's backend as ``ExtensionContext.backend``; a store for a shared
backend runs its statements through it (``SqliteBackend.run`` and ``write``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from ._backend import DEFAULT_URL as DEFAULT_URL
from ._backend import ENVIRONMENT_VARIABLE as ENVIRONMENT_VARIABLE
from ._backend import Backend as Backend
from ._backend import BackendError as BackendError
from ._backend import BackendUrl as BackendUrl
from ._backend import MemoryBackend as MemoryBackend
from ._backend import parse_url as parse_url
from ._sqlite import BUSY_TIMEOUT, check_file
from ._sqlite import SqliteBackend as SqliteBackend
from ._sqlite import SqliteDatabase as SqliteDatabase
from ._sqlite import StorageUnavailable as StorageUnavailable

__all__ = [
    "DEFAULT_URL",
    "ENVIRONMENT_VARIABLE",
    "Backend",
    "BackendError",
    "BackendUrl",
    "MemoryBackend",
    "SqliteBackend",
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
    async with SqliteBackend.open(
        parsed.path,
        lease=parsed.number("lease", SqliteBackend.DEFAULT_LEASE),
        poll=parsed.number("poll", SqliteBackend.DEFAULT_POLL),
        busy_timeout=parsed.number("timeout", BUSY_TIMEOUT),
    ) as backend:
        yield backend


def check_url(url: str) -> None:
    """Open and close the backend ``url`` names, in this thread, or raise ``BackendError``:
    what a command line does before it accepts anything."""
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        check_file(parsed.path)
