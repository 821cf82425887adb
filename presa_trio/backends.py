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
the ``PRESA_STORE`` environment variable). ``open_database(url)`` opens a shared store's
database alone, without joining its workers, for tools that read it while servers run.

Extensions reach the run's backend as ``ExtensionContext.backend`` and ask it for what they
need by protocol: a backend on a SQL database is ``SqlBacked`` (a store for it runs its
statements on ``db``, a ``SqlDatabase``, and creates its tables there once with
``Tables``), and a shared one keeps ``WorkerLeases`` (which
workers are alive). Whether the backend works now is ``Runtime.backend_health()`` (a
``BackendHealth``): a shared backend's heartbeat and signal loop retry what fails, with
backoff, and report it there.
"""

from __future__ import annotations

from ._backends.opening import check_url as check_url
from ._backends.opening import open_backend as open_backend
from ._backends.opening import open_database as open_database
from ._backends.protocol import DEFAULT_URL as DEFAULT_URL
from ._backends.protocol import ENVIRONMENT_VARIABLE as ENVIRONMENT_VARIABLE
from ._backends.protocol import Backend as Backend
from ._backends.protocol import BackendError as BackendError
from ._backends.protocol import BackendHealth as BackendHealth
from ._backends.protocol import BackendUrl as BackendUrl
from ._backends.protocol import MemoryBackend as MemoryBackend
from ._backends.protocol import WorkerLeases as WorkerLeases
from ._backends.protocol import parse_url as parse_url
from ._backends.sql import DEFAULT_LEASE as DEFAULT_LEASE
from ._backends.sql import Connection as Connection
from ._backends.sql import SharedBackend as SharedBackend
from ._backends.sql import SqlBacked as SqlBacked
from ._backends.sql import SqlDatabase as SqlDatabase
from ._backends.sql import StorageUnavailable as StorageUnavailable
from ._backends.sql import Tables as Tables
from ._backends.sqlite import SqliteDatabase as SqliteDatabase

__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_URL",
    "ENVIRONMENT_VARIABLE",
    "Backend",
    "BackendError",
    "BackendHealth",
    "BackendUrl",
    "Connection",
    "MemoryBackend",
    "SharedBackend",
    "SqlBacked",
    "SqlDatabase",
    "SqliteDatabase",
    "StorageUnavailable",
    "Tables",
    "WorkerLeases",
    "check_url",
    "open_backend",
    "open_database",
    "parse_url",
]
