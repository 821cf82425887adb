"""Older-era sessions, kept where the run's workers share things (memory, SQLite, PostgreSQL).

An ``initialize`` opens a session; every later request of that client names it in
``Mcp-Session-Id``, and may reach any worker on any host. So a session is a record in the
run's backend, never a worker's memory: the negotiated version, the client's capabilities and
info, its log level, its resource subscriptions, who holds its GET stream, and when it
expires. A request reads it once; an idle session expires after its TTL, renewed (one write)
only when a quarter of it has passed, so a busy session is not a write per request.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, final

import trio

from .._boundary import error_boundary
from ..errors import CapacityExceeded, McpError
from .session_signals import SessionSignals
from .stream_log import StreamLimits, StreamLog

logger = logging.getLogger("presa_trio")


def now_ms() -> int:
    return int(time.time() * 1000)


@final
@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One session, as every worker reads it."""

    session_id: str
    principal: str
    version: str
    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None
    expires_ms: int
    log_level: str | None = None
    subscriptions: frozenset[str] = field(default_factory=frozenset)
    #: The worker holding its GET stream and until when that claim holds without renewal.
    stream_holder: str | None = None
    stream_until_ms: int = 0

    def stream_held(self, now: int) -> bool:
        return self.stream_holder is not None and self.stream_until_ms > now


@final
@dataclass(frozen=True, slots=True)
class SessionLimits:
    """How many sessions may be open: in all, and for one principal (None: no share)."""

    max_sessions: int = 10_000
    max_sessions_per_principal: int | None = 1_000

    def refusal(self, total: int, of_principal: int, principal: str) -> str | None:
        if total >= self.max_sessions:
            return "max_sessions"
        share = self.max_sessions_per_principal
        if share is not None and principal and of_principal >= share:
            return "max_sessions_per_principal"
        return None


def encode(record: SessionRecord) -> str:
    fields = asdict(record)
    fields["subscriptions"] = sorted(record.subscriptions)
    return json.dumps(fields, separators=(",", ":"))


def decode(text: str) -> SessionRecord:
    fields: dict[str, Any] = json.loads(text)
    fields["subscriptions"] = frozenset(fields["subscriptions"])
    return SessionRecord(**fields)


Change = Callable[[SessionRecord], SessionRecord]


class SessionStore(Protocol):
    """Where a run's sessions live. Every method is one read or one write."""

    async def create(self, record: SessionRecord, limits: SessionLimits) -> None:
        """Store a new session, or raise ``CapacityExceeded`` naming the bound it passes."""

    async def get(self, session_id: str) -> SessionRecord | None:
        """The session, or None when unknown or expired."""

    async def change(self, session_id: str, change: Change) -> SessionRecord | None:
        """Apply ``change`` to the live session atomically; its new record, or None."""

    async def delete(self, session_id: str) -> bool:
        """End the session; whether there was one."""

    async def delete_expired(self, now: int) -> int: ...


@final
class MemorySessionStore:
    """One process's sessions (the ``memory:`` backend, and stdio)."""

    def __init__(self) -> None:
        self._records: dict[str, SessionRecord] = {}

    async def create(self, record: SessionRecord, limits: SessionLimits) -> None:
        await trio.lowlevel.checkpoint()
        now = now_ms()
        live = [r for r in self._records.values() if r.expires_ms > now]
        mine = sum(1 for r in live if r.principal == record.principal)
        refused = limits.refusal(len(live), mine, record.principal)
        if refused is not None:
            raise CapacityExceeded(refused, "Too many open sessions")
        self._records[record.session_id] = record

    async def get(self, session_id: str) -> SessionRecord | None:
        await trio.lowlevel.checkpoint()
        record = self._records.get(session_id)
        if record is None or record.expires_ms <= now_ms():
            return None
        return record

    async def change(self, session_id: str, change: Change) -> SessionRecord | None:
        record = await self.get(session_id)
        if record is None:
            return None
        record = self._records[session_id] = change(record)
        return record

    async def delete(self, session_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        return self._records.pop(session_id, None) is not None

    async def delete_expired(self, now: int) -> int:
        await trio.lowlevel.checkpoint()
        gone = [k for k, r in self._records.items() if r.expires_ms <= now]
        for key in gone:
            del self._records[key]
        return len(gone)


def due_for_renewal(record: SessionRecord, ttl_ms: int, now: int) -> bool:
    """Whether a quarter of ``record``'s TTL has passed since it was last renewed (before,
    a request writes nothing)."""
    return record.expires_ms - now <= ttl_ms * 3 // 4


class SessionSettings(Protocol):
    """What a run reads of ``presa_trio.Sessions`` (a frozen value)."""

    @property
    def idle_ttl(self) -> float: ...

    @property
    def max_sessions(self) -> int: ...

    @property
    def max_sessions_per_principal(self) -> int | None: ...

    @property
    def push_timeout(self) -> float: ...

    @property
    def max_pending_pushes(self) -> int: ...

    @property
    def max_pending_pushes_per_principal(self) -> int | None: ...

    @property
    def resumable(self) -> bool: ...

    @property
    def retry(self) -> float: ...

    @property
    def stream_retention(self) -> float: ...

    @property
    def max_stream_events(self) -> int: ...

    @property
    def max_stream_bytes(self) -> int: ...

    @property
    def max_streams_per_session(self) -> int: ...


SWEEP_SECONDS = 60.0


@final
@dataclass(slots=True)
class RunSessions:
    """One run's sessions: where they are kept, what is live of them here, the settings."""

    store: SessionStore
    signals: SessionSignals
    settings: SessionSettings
    streams: StreamLog
    stream_limits: StreamLimits = field(init=False)

    def __post_init__(self) -> None:
        settings = self.settings
        self.stream_limits = StreamLimits(
            settings.max_stream_events,
            settings.max_stream_bytes,
            int(settings.stream_retention * 1000),
            int(settings.idle_ttl * 1000),
            settings.max_streams_per_session,
        )

    @property
    def limits(self) -> SessionLimits:
        return SessionLimits(self.settings.max_sessions, self.settings.max_sessions_per_principal)

    async def sweep(self) -> None:
        """Delete expired sessions now and then, for the whole run; each sweep behind an
        error boundary (a failing store is tried again at the next)."""
        while True:
            await trio.sleep(SWEEP_SECONDS)
            with error_boundary("sweeping expired sessions", logger):
                try:
                    await self.store.delete_expired(now_ms())
                    await self.streams.delete_expired(now_ms())
                except McpError as exc:  # a store that is down says so once, retryable
                    logger.warning("expired sessions were not swept: %s", exc.message)
