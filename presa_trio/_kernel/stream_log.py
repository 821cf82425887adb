"""The event log of resumable streams (an older-era session's, 2025-11-25), kept where the
run's workers share things (memory, SQLite, PostgreSQL).

A request's stream that may be resumed logs every message before it is sent, numbered from 1
(0 is the priming event, which carries nothing). A client that lost the connection asks any
worker for what followed the last id it saw (``Last-Event-ID``); that worker reads it here,
then follows the stream live until its answer is logged. Bounded: a stream logs at most
``max_events`` messages and ``max_bytes`` of them (the answer always: later notifications
are sent but not logged, so a resumed stream skips them); an ended stream is kept
``retention`` seconds; a running one as long as its session's idle TTL after its last
message; a session holds at most ``max_streams_per_session`` (its oldest ended ones go first,
and a request over the bound answers on a stream that cannot be resumed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Protocol, final

import trio


def now_ms() -> int:
    return int(time.time() * 1000)


@final
@dataclass(frozen=True, slots=True)
class StreamLimits:
    """How much of a resumable stream is kept, and for how long (milliseconds)."""

    max_events: int = 10_000
    max_bytes: int = 8 * 1024 * 1024
    retention_ms: int = 300_000
    idle_ms: int = 3_600_000
    max_streams_per_session: int = 100


@final
@dataclass(frozen=True, slots=True)
class StreamHead:
    """Whose a stream is, who runs its request, how far it got, whether it ended, and the
    id of its request (JSON)."""

    session_id: str
    principal: str
    worker_id: str
    last_seq: int
    ended: bool
    request: str = "null"


@final
@dataclass(frozen=True, slots=True)
class Page:
    """A stream's head and its logged messages after some place, in order."""

    head: StreamHead
    events: list[tuple[int, bytes]]


@final
@dataclass(frozen=True, slots=True)
class Appended:
    """Where a message went in its stream's log (``seq`` None: not logged, past a bound or
    the stream is gone), and whether a resumed connection follows the stream."""

    seq: int | None
    followed: bool


class StreamLog(Protocol):
    """Where a run's resumable streams are logged. Every method is one read or one write."""

    async def open(self, head: StreamHead, stream_id: str, limits: StreamLimits) -> bool:
        """Start logging a stream; False when its session holds too many running ones."""

    async def append(
        self, stream_id: str, data: bytes, limits: StreamLimits, *, final: bool = False
    ) -> Appended:
        """Log a message (``final``: the answer, which ends the stream and is always
        logged while the stream is held)."""

    async def end_if_running(self, stream_id: str, data: bytes, limits: StreamLimits) -> bool:
        """Log ``data`` as the answer of a stream that has none yet (its worker was lost);
        whether it did."""

    async def read(self, stream_id: str, after: int, limit: int) -> Page | None:
        """The head and up to ``limit`` messages after ``after``; None when not held."""

    async def follow(self, stream_id: str) -> None:
        """Mark the stream followed: its worker announces each message it logs."""

    async def delete_session(self, session_id: str) -> int: ...

    async def delete_expired(self, now: int) -> int: ...


@dataclass(slots=True)
class _Stream:
    head: StreamHead
    opened_ms: int
    expires_ms: int
    next_seq: int = 1
    size: int = 0
    followed: bool = False
    events: list[tuple[int, bytes]] = field(default_factory=list)


@final
class MemoryStreamLog:
    """One process's streams (the ``memory:`` backend)."""

    def __init__(self) -> None:
        self._streams: dict[str, _Stream] = {}
        self._of_session: dict[str, list[str]] = {}  # stream ids, oldest first

    def _held(self, stream_id: str) -> _Stream | None:
        stream = self._streams.get(stream_id)
        if stream is None or stream.expires_ms <= now_ms():
            return None
        return stream

    async def open(self, head: StreamHead, stream_id: str, limits: StreamLimits) -> bool:
        await trio.lowlevel.checkpoint()
        now = now_ms()
        ids = self._of_session.setdefault(head.session_id, [])
        while len(ids) >= limits.max_streams_per_session:  # let the oldest answered go
            oldest = next((i for i in ids if self._streams[i].head.ended), None)
            if oldest is None:
                return False
            self._forget(oldest)
        self._of_session.setdefault(head.session_id, ids)  # _forget drops an emptied list
        self._streams[stream_id] = _Stream(head, now, now + limits.idle_ms)
        ids.append(stream_id)
        return True

    def _forget(self, stream_id: str) -> None:
        stream = self._streams.pop(stream_id)
        ids = self._of_session[stream.head.session_id]
        ids.remove(stream_id)
        if not ids:
            del self._of_session[stream.head.session_id]

    async def append(
        self, stream_id: str, data: bytes, limits: StreamLimits, *, final: bool = False
    ) -> Appended:
        await trio.lowlevel.checkpoint()
        stream = self._held(stream_id)
        if stream is None or stream.head.ended:
            return Appended(None, False)
        return _log(stream, data, limits, final)

    async def end_if_running(self, stream_id: str, data: bytes, limits: StreamLimits) -> bool:
        await trio.lowlevel.checkpoint()
        stream = self._held(stream_id)
        if stream is None or stream.head.ended:
            return False
        _log(stream, data, limits, True)
        return True

    async def read(self, stream_id: str, after: int, limit: int) -> Page | None:
        await trio.lowlevel.checkpoint()
        stream = self._held(stream_id)
        if stream is None:
            return None
        events = [event for event in stream.events if event[0] > after][:limit]
        return Page(stream.head, events)

    async def follow(self, stream_id: str) -> None:
        await trio.lowlevel.checkpoint()
        stream = self._held(stream_id)
        if stream is not None:
            stream.followed = True

    async def delete_session(self, session_id: str) -> int:
        await trio.lowlevel.checkpoint()
        ids = list(self._of_session.get(session_id, ()))
        for stream_id in ids:
            self._forget(stream_id)
        return len(ids)

    async def delete_expired(self, now: int) -> int:
        await trio.lowlevel.checkpoint()
        gone = [key for key, stream in self._streams.items() if stream.expires_ms <= now]
        for stream_id in gone:
            self._forget(stream_id)
        return len(gone)


def _log(stream: _Stream, data: bytes, limits: StreamLimits, final: bool) -> Appended:
    """Log ``data`` on ``stream`` if its bounds allow (the answer always)."""
    now = now_ms()
    full = len(stream.events) >= limits.max_events or stream.size + len(data) > limits.max_bytes
    if full and not final:
        return Appended(None, stream.followed)
    seq = stream.next_seq
    stream.next_seq += 1
    stream.size += len(data)
    stream.events.append((seq, data))
    head = stream.head
    stream.head = replace(head, last_seq=seq, ended=final)
    stream.expires_ms = now + (limits.retention_ms if final else limits.idle_ms)
    return Appended(seq, stream.followed)
