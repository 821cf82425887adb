"""Where a run keeps what its workers share: the backend, named by one URL.

``memory:`` (the default) keeps everything in this process, as one worker needs.
``sqlite:///ABSOLUTE/PATH.db`` shares it between the worker processes of one host. A run
opens its backend with ``presa_trio.backends.open_backend(url)`` and hands it to the
``Runtime``: the listen bus fans events out through it, the ``requestState`` key ring
comes from it, and extensions keep their records in it (``presa_trio.ext.tasks`` its
tasks).

Every backend offers the same small surface, so the core and the Tasks extension never ask
which one they have:

- ``worker_id``: this run's name among the workers (a fresh one per run);
- ``shared``: whether other processes see what this one does;
- ``shared_key()``: the ``requestState`` key every worker uses (None: each run its own);
- ``broadcast(topic, body)``: a message to every other worker, delivered to the handlers
  they registered with ``on_broadcast``;
- ``call(worker_id, topic, body)``: ask one worker, through its ``on_call`` handler, and
  wait for its answer (the caller bounds the wait);
- ``attention()``: held while this worker expects signals, which then arrive promptly;
- ``health()``: whether its background work (heartbeats, reading signals) currently
  succeeds, as a ``BackendHealth`` (what ``Runtime.backend_health()`` reports).

What some backends also offer is a protocol of its own, which a caller checks for: a shared
backend keeps ``WorkerLeases`` (which workers are alive), and one on a SQL database is
``SqlBacked`` (``presa_trio.backends``).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, final, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import trio

Body = Mapping[str, Any]
BroadcastHandler = Callable[[Body], None]
CallHandler = Callable[[Body], Awaitable[Body]]

DEFAULT_URL = "memory:"
ENVIRONMENT_VARIABLE = "PRESA_STORE"
POSTGRES_OPTIONS = frozenset({"lease", "timeout"})  # the rest of the query is libpq's


class BackendError(ValueError):
    """A backend URL that names nothing usable: an unknown scheme, a bad path or option,
    a database that cannot be opened. Its message is one line, fit for a startup error."""


@final
@dataclass(frozen=True, slots=True)
class BackendHealth:
    """Whether a backend's background work currently succeeds (``Backend.health()``).

    ``reason`` says, in one line fit for an operator, which work fails and why (None when
    healthy); it names no file, host or password. Unhealthy is not down: requests carry on,
    those that need the failing store get a retryable 503, and the backend keeps trying.
    """

    healthy: bool
    reason: str | None = None


HEALTHY = BackendHealth(True)


class Backend(Protocol):
    """What a run needs of the place its workers share (see the module docstring)."""

    kind: str
    worker_id: str
    shared: bool

    async def shared_key(self) -> bytes | None: ...

    async def broadcast(self, topic: str, body: Body) -> None: ...

    async def call(self, worker_id: str, topic: str, body: Body) -> Body | None:
        """Ask ``worker_id`` and wait for its answer (None: its handler gave none). The
        caller bounds the wait: a lost worker never answers."""

    def on_broadcast(self, topic: str, handler: BroadcastHandler) -> None: ...

    def on_call(self, topic: str, handler: CallHandler) -> None: ...

    def attention(self) -> AbstractContextManager[None]:
        """Held while this worker expects signals (a listen stream is open, a task runs
        here, a call waits for its answer): then they arrive within the backend's bound.
        A worker that expects nothing may look for them far less often."""
        ...

    def health(self) -> BackendHealth:
        """Whether this backend's background work succeeds now (see ``BackendHealth``)."""
        ...


@runtime_checkable
class WorkerLeases(Protocol):
    """Leases of the workers sharing a backend: each worker renews its own, and a worker
    whose lease lapsed (or that left) is lost. What the Tasks extension asks, with a
    ``LeaseStore``, to fail the tasks a lost worker leaves."""

    #: Seconds a worker may go without renewing its lease before it counts as lost.
    lease: float

    @property
    def judges_leases(self) -> bool:
        """Whether this worker may judge others' leases now: only once its own renewals
        have held for a whole lease (after an outage every lease looks lapsed)."""
        ...

    async def live_workers(self) -> frozenset[str]:
        """The workers whose lease holds now (this one among them while it renews)."""
        ...


def new_worker_id() -> str:
    return secrets.token_hex(8)


@final
class MemoryBackend:
    """Nothing shared: one process, one worker. Broadcasts reach no one; every task is
    this worker's own, so nothing ever calls another worker."""

    kind = "memory"
    shared = False

    def __init__(self) -> None:
        self.worker_id = new_worker_id()

    async def shared_key(self) -> bytes | None:
        await trio.lowlevel.checkpoint()
        return None

    async def broadcast(self, topic: str, body: Body) -> None:
        await trio.lowlevel.checkpoint()

    async def call(self, worker_id: str, topic: str, body: Body) -> Body | None:
        await trio.lowlevel.checkpoint()
        return None

    def on_broadcast(self, topic: str, handler: BroadcastHandler) -> None:
        pass

    def on_call(self, topic: str, handler: CallHandler) -> None:
        pass

    def attention(self) -> AbstractContextManager[None]:
        return nullcontext()

    def health(self) -> BackendHealth:
        """Always healthy: nothing runs in the background, nothing can fail there."""
        return HEALTHY


@final
@dataclass(frozen=True, slots=True)
class BackendUrl:
    """A parsed backend URL: its scheme, its path, and its options (the query string)."""

    scheme: str
    path: str
    options: Mapping[str, str]

    def number(self, name: str, default: float) -> float:
        text = self.options.get(name)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            raise BackendError(f"store option {name}={text!r} is not a number") from None
        if not value > 0:
            raise BackendError(f"store option {name}={text!r} must be positive")
        return value


def parse_url(url: str) -> BackendUrl:
    """Split and check ``url``; raises ``BackendError`` naming what is wrong."""
    if url in ("memory:", "memory://"):
        return BackendUrl("memory", "", {})
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        if parts.netloc:
            raise BackendError(
                f"a sqlite store URL has no host: sqlite:///ABSOLUTE/PATH.db, got {url!r}"
            )
        if not parts.path.startswith("/") or parts.path.endswith("/"):
            raise BackendError(f"a sqlite store needs an absolute file path, got {url!r}")
        # sqlite:///var/x.db and sqlite:////var/x.db both name /var/x.db
        path = "/" + parts.path.lstrip("/")
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = sorted(set(options) - {"lease", "poll", "timeout"})
        if unknown:
            raise BackendError(
                f"unknown sqlite store options {unknown}: known are lease, poll, timeout"
            )
        return BackendUrl("sqlite", path, options)
    if parts.scheme in ("postgresql", "postgres"):
        query = parse_qsl(parts.query, keep_blank_values=True)
        ours = {k: v for k, v in query if k in POSTGRES_OPTIONS}
        libpq = urlencode([(k, v) for k, v in query if k not in POSTGRES_OPTIONS])
        return BackendUrl("postgresql", urlunsplit(parts._replace(query=libpq)), ours)
    scheme = parts.scheme or url
    raise BackendError(
        f"unknown store {scheme!r}: use memory:, sqlite:///ABSOLUTE/PATH.db or "
        "postgresql://USER@HOST:PORT/DB"
    )
