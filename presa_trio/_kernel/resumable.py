"""Resumable streams of an older-era session (2025-11-25, SEP-1699): the stream of a request
that survives a dropped connection, and the reconnection that resumes it on any worker.

A request's stream logs each message (``stream_log``) before it is sent with its id, after
a priming event that gives the client an id and a ``retry`` delay. Its connection may drop,
or the tool may close it on purpose (``ctx.close_stream()``): the request runs on, logging
what it sends. The client reconnects with a GET naming the last id it saw
(``Last-Event-ID``); the worker it reaches replays what followed from the log, then follows
the stream live (the worker running the request announces each message it logs once the
stream is followed) until the answer, which ends it. A worker that was lost while running
the request leaves an answer saying so, written by the first resumer that notices.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, final

import trio

from .._backends.protocol import WorkerLeases
from .._protocol import era, sse
from .._protocol.jsonrpc import encode, error_message
from ..errors import InternalError, McpError, StreamNotHeld
from .bus import STREAM_ADVANCED, BusEvent
from .context import Responder
from .runtime import Runtime
from .sessions import RunSessions, SessionRecord
from .stream_log import StreamHead

logger = logging.getLogger("presa_trio")

#: The requests whose streams may be resumed: those that run the server's own code.
RESUMABLE_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
#: Messages read from the log at a time when a stream is resumed.
PAGE = 100
#: How long a resumed stream waits for news before it sends a keepalive and checks that the
#: worker running its request is still there.
QUIET_SECONDS = 15.0
#: The bound on the writes a stream makes after its request was cancelled (its answer).
SETTLE_SECONDS = 5.0


class EventTransport(Protocol):
    """What a transport gives a resumable stream (HTTP does; stdio has nothing to resume).
    A responder class that gives it says so with ``carries_resumable_streams = True``
    (read per request: cheaper than an ``isinstance`` against this protocol)."""

    carries_resumable_streams: bool

    def keep_running(self) -> None:
        """From now on, a client that goes away does not cancel the request."""

    async def send_event(self, framed: bytes, *, final: bool = False) -> None:
        """Send a framed SSE event (``final``: the last, which ends the response)."""

    async def close_connection(self) -> None:
        """End the HTTP response now; the request goes on."""

    async def keepalive(self) -> None: ...


@final
@dataclass(slots=True)
class Reply:
    """Where the answer to an older-era request goes: its transport's responder, or the
    resumable stream that logs it on its way."""

    responder: Responder


def stream_advanced(stream_id: str) -> BusEvent:
    """What tells a resumed connection, on whichever worker, that its stream logged more."""
    return BusEvent("presa/stream", {}, STREAM_ADVANCED, stream_id)


def resumable(
    sessions: RunSessions, record: SessionRecord, method: str, responder: Responder
) -> EventTransport | None:
    """The transport to resume this request's stream on, when it can be resumed."""
    if (
        sessions.settings.resumable
        and record.version == "2025-11-25"
        and method in RESUMABLE_METHODS
        and getattr(responder, "carries_resumable_streams", False)
    ):
        return cast(EventTransport, responder)
    return None


async def open_stream(
    transport: EventTransport,
    sessions: RunSessions,
    record: SessionRecord,
    request_id: Any,
    runtime: Runtime,
) -> LoggedResponder | None:
    """Start a resumable stream for request ``request_id`` of ``record``'s session: logged,
    primed; None when the session holds too many running streams (the request answers on
    a stream that cannot be resumed)."""
    stream_id = era.new_stream_id()
    head = StreamHead(
        record.session_id,
        record.principal,
        runtime.backend.worker_id,
        0,
        False,
        json.dumps(request_id),
    )
    if not await sessions.streams.open(head, stream_id, sessions.stream_limits):
        return None
    logged = LoggedResponder(transport, sessions, stream_id, runtime)
    transport.keep_running()
    retry_ms = int(sessions.settings.retry * 1000)
    await transport.send_event(sse.priming(era.event_id(stream_id, 0), retry_ms))
    return logged


@final
class LoggedResponder:
    """A resumable stream's responder: each message logged, then sent with its id."""

    __slots__ = ("_runtime", "_sessions", "_transport", "stream_id")

    def __init__(
        self, transport: EventTransport, sessions: RunSessions, stream_id: str, runtime: Runtime
    ) -> None:
        self._transport = transport
        self._sessions = sessions
        self._runtime = runtime
        self.stream_id = stream_id

    async def _log(self, data: bytes, *, final: bool) -> bytes:
        """Log ``data``; the event to send (unnamed when it was not logged)."""
        sessions = self._sessions
        appended = await sessions.streams.append(
            self.stream_id, data, sessions.stream_limits, final=final
        )
        if appended.followed:
            self._runtime.publish(stream_advanced(self.stream_id))
        if appended.seq is None:
            return sse.event(data)
        return sse.logged(data, era.event_id(self.stream_id, appended.seq))

    async def notify(self, data: bytes) -> None:
        await self._transport.send_event(await self._log(data, final=False))

    async def keepalive(self) -> None:
        await self._transport.keepalive()

    async def finish(
        self, data: bytes, status: int, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        # The answer is logged even when the request's scope was cancelled (the run
        # drains): a resumer waits for it. Bounded; a store that fails leaves the stream
        # to its idle expiry, and the client that is still here gets the answer anyway.
        framed = sse.event(data)
        with trio.CancelScope(shield=True) as settle:
            settle.deadline = trio.current_time() + SETTLE_SECONDS
            try:
                framed = await self._log(data, final=True)
            except McpError as exc:
                logger.warning("an answer was not logged for its stream: %s", exc.message)
                await trio.lowlevel.checkpoint()
        await self._transport.send_event(framed, final=True)

    async def hang_up(self) -> None:
        """End the connection now (``ctx.close_stream()``): the client reconnects."""
        await self._transport.close_connection()


async def resume(
    transport: EventTransport,
    sessions: RunSessions,
    record: SessionRecord,
    last_event_id: str,
    runtime: Runtime,
) -> None:
    """Replay what followed ``last_event_id`` on its stream, then follow the stream live
    until its answer. ``StreamNotHeld`` (before any byte is sent) when the id names no
    place in a stream this session still holds: unknown, expired, another session's or
    another principal's are all answered alike."""
    place = era.parse_event_id(last_event_id)
    if place is None:
        raise StreamNotHeld()
    stream_id, after = place
    log = sessions.streams
    page = await log.read(stream_id, after, PAGE)
    if (
        page is None
        or page.head.session_id != record.session_id
        or page.head.principal != record.principal
        or after > page.head.last_seq
    ):
        raise StreamNotHeld()
    agreed = {STREAM_ADVANCED: [stream_id]}
    async with runtime.bus.listen(f"resume {stream_id}", agreed, record.principal) as listener:
        await transport.keepalive()  # resumed: the response starts
        if not page.head.ended:
            await log.follow(stream_id)
        with runtime.backend.attention():
            await _replay(transport, sessions, stream_id, after, runtime, listener)


async def _replay(
    transport: EventTransport,
    sessions: RunSessions,
    stream_id: str,
    after: int,
    runtime: Runtime,
    listener: Any,
) -> None:
    log = sessions.streams
    while True:
        page = await log.read(stream_id, after, PAGE)
        if page is None:
            return  # let go meanwhile (its session ended): a reconnect is told so
        head = page.head
        for seq, data in page.events:
            final = head.ended and seq == head.last_seq
            await transport.send_event(sse.logged(data, era.event_id(stream_id, seq)), final=final)
            after = seq
            if final:
                return
        if len(page.events) == PAGE:
            continue
        with trio.move_on_after(QUIET_SECONDS) as quiet:
            try:
                await listener.receive()
            except trio.EndOfChannel:  # the run drains, or this stream fell behind
                await trio.lowlevel.checkpoint()
                return
        if quiet.cancelled_caught:
            await transport.keepalive()
            await _answer_if_lost(sessions, stream_id, head, runtime)


async def _answer_if_lost(
    sessions: RunSessions, stream_id: str, head: StreamHead, runtime: Runtime
) -> None:
    """Leave the answer of a stream whose worker was lost: an error saying so."""
    backend = runtime.backend
    if head.ended or not isinstance(backend, WorkerLeases) or not backend.judges_leases:
        await trio.lowlevel.checkpoint()
        return
    if head.worker_id in await backend.live_workers():
        return
    request_id = json.loads(head.request)
    error = InternalError("The worker running this request was lost")
    data = encode(error_message(request_id, error))
    if await sessions.streams.end_if_running(stream_id, data, sessions.stream_limits):
        runtime.publish(stream_advanced(stream_id))
