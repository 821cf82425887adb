"""The stdio transport (wire §14): newline-delimited JSON-RPC on stdin/stdout.

Each request runs as its own task in one nursery; every line out goes through one writer, so
messages never interleave, and answers that queue while it writes leave together in its next
write; ``notifications/cancelled`` cancels its request's scope. At EOF it drains the run
(listen streams end with their final result), gives in-flight requests a bounded grace,
cancels the rest and returns, leaving the process's stdin and stdout as it found them. Logs
belong on stderr: nothing but MCP messages is ever written to stdout.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, contextmanager
from typing import Protocol, final

import trio

from .._kernel.dispatcher import Dispatcher
from .._kernel.runtime import Runtime
from .._kernel.tracing import PIPE
from .._protocol.era import Era, classify_message, new_session_id
from .._protocol.jsonrpc import (
    EnvelopeError,
    Notification,
    Request,
    RequestId,
    Response,
    parse_any,
)
from ..errors import InvalidRequest, RequestTooLarge

logger = logging.getLogger("presa_trio.stdio")

DEFAULT_MAX_LINE = 4 * 1024 * 1024
DEFAULT_GRACE = 5.0
WRITE_BATCH = 65536  # bytes of queued answers one write gathers (a pipe's buffer on Linux)


@final
class StdioResponder:
    """Writes one request's notifications and response as lines through the shared writer."""

    __slots__ = ("_out",)

    def __init__(self, out: trio.MemorySendChannel[bytes]) -> None:
        self._out = out

    async def notify(self, data: bytes) -> None:
        await self._out.send(data)

    async def keepalive(self) -> None:
        """stdio needs no keep-alive: the pipe stays open."""
        await trio.lowlevel.checkpoint()

    async def finish(
        self, data: bytes, status: int, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        await self._out.send(data)


@final
class LineBuffer:
    """Bytes in, lines out: the sans-IO half of reading stdin (h11's way).

    ``feed`` returns the complete lines, without their newline, that a chunk finished; None
    stands for a line over ``max_line`` bytes, which is skipped to its end without buffering
    it. Blank lines are dropped. ``close`` returns what an unterminated last line leaves.
    """

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        lines: list[bytes | None] = []
        self._buffer += chunk
        while True:
            end = self._buffer.find(b"\n")
            if end == -1:
                if len(self._buffer) > self.max_line:
                    if not self._skipping:
                        lines.append(None)
                    self._skipping = True
                    self._buffer.clear()
                return lines
            line = bytes(self._buffer[:end]).rstrip(b"\r")
            del self._buffer[: end + 1]
            if self._skipping:
                self._skipping = False
            elif len(line) > self.max_line:
                lines.append(None)
            elif line.strip():
                lines.append(line)

    def close(self) -> list[bytes | None]:
        rest = bytes(self._buffer)
        self._buffer.clear()
        return [rest] if rest.strip() and not self._skipping else []


async def _batches(
    stream: trio.abc.ReceiveStream, max_line: int
) -> AsyncIterator[list[bytes | None]]:
    """The lines each read from ``stream`` completes, until EOF (one batch per read)."""
    lines = LineBuffer(max_line)
    while True:
        chunk = bytes(await stream.receive_some(65536))
        if not chunk:
            break
        yield lines.feed(chunk)
    await trio.lowlevel.checkpoint()
    yield lines.close()
    await trio.lowlevel.checkpoint()


async def _writer(stdout: trio.abc.SendStream, lines: trio.MemoryReceiveChannel[bytes]) -> None:
    """Write each message as a line. Messages that queued while the last write went out go
    together in the next (up to about a pipe's buffer): with many requests in flight, one
    write carries many answers."""
    async with lines:
        async for line in lines:
            await stdout.send_all(b"\n".join([line, *_queued(lines, WRITE_BATCH - len(line)), b""]))


def _queued(lines: trio.MemoryReceiveChannel[bytes], room: int) -> list[bytes]:
    """The messages already waiting in ``lines`` while they fit in ``room`` bytes (the one
    that does not is taken too); never waits for more."""
    queued = []
    while room > 0:
        try:
            line = lines.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            break
        queued.append(line)
        room -= len(line)
    return queued


@final
class _Session:
    """The requests in flight on one stdio connection, and the older era's session when a
    client opened one with ``initialize`` (the process is then that session)."""

    def __init__(
        self, dispatcher: Dispatcher, runtime: Runtime, out: trio.MemorySendChannel[bytes]
    ) -> None:
        self.dispatcher = dispatcher
        self.runtime = runtime
        self.out = out
        self.inflight: dict[RequestId, trio.CancelScope] = {}
        self.idle = trio.Event()
        self.idle.set()
        #: The older-era session this connection opened (None: none, or not yet).
        self.session_id: str | None = None

    def start(self, nursery: trio.Nursery, request: Request, legacy: bool = False) -> None:
        """Register the request as in flight now, then run it as its own task."""
        scope = trio.CancelScope()
        if not self.inflight:
            self.idle = trio.Event()
        self.inflight[request.id] = scope
        nursery.start_soon(self._serve, request, scope, legacy, nursery)

    async def _serve(
        self, request: Request, scope: trio.CancelScope, legacy: bool, nursery: trio.Nursery
    ) -> None:
        try:
            with scope:
                responder = StdioResponder(self.out)
                if not legacy:
                    await self.dispatcher.serve(
                        request, None, responder, self.runtime, connection=PIPE
                    )
                elif request.method == "initialize" and self.session_id is None:
                    opening = new_session_id()
                    opened = await self.dispatcher.serve_session(
                        request, None, responder, self.runtime, new_session=opening
                    )
                    if opened and self.session_id is None:
                        self.session_id = opening
                        nursery.start_soon(self._changes, opening)
                else:
                    await self.dispatcher.serve_session(
                        request, self.session_id, responder, self.runtime
                    )
        finally:
            if self.inflight.get(request.id) is scope:
                del self.inflight[request.id]
            if not self.inflight:
                self.idle.set()

    async def _changes(self, session_id: str) -> None:
        """The session's change notifications (list changes, subscribed resources) on
        stdout, as an HTTP client gets them on its GET stream, until the connection ends."""
        refusal = await self.dispatcher.session_exchange(
            "GET", session_id, StdioResponder(self.out), self.runtime, None
        )
        if refusal is not None:
            logger.warning("the session's change notifications stopped: %s", refusal.message)

    async def _exchange(self, message: Notification | Response) -> None:
        """A client's notification or answer on the older era's session."""
        refusal = await self.dispatcher.session_exchange(
            "POST", self.session_id, StdioResponder(self.out), self.runtime, None, message
        )
        if refusal is not None:
            logger.info("a %s was not taken: %s", type(message).__name__.lower(), refusal.message)

    def cancel(self, notification: Notification) -> None:
        params = notification.params
        request_id = params.get("requestId") if isinstance(params, dict) else None
        scope = self.inflight.get(request_id) if isinstance(request_id, int | str) else None
        if scope is not None:  # unknown or finished ids are ignored (wire §15.2)
            scope.cancel()

    def take(self, requests: trio.Nursery, line: bytes | None) -> EnvelopeError | None:
        """Start ``line``'s request, or act on its notification, at once; or return why it
        cannot be served, when it is not a message (see ``refuse``). Taking a line never
        waits, so the requests of one read all start before any of them runs, and their
        answers can leave in one write."""
        if line is None:
            return EnvelopeError(RequestTooLarge("Message exceeds the line limit"))
        try:
            message = parse_any(line)
        except EnvelopeError as exc:
            return exc
        legacy = False
        if self.dispatcher.legacy is not None:
            method = None if isinstance(message, Response) else message.method
            legacy = classify_message(method, message, self.session_id is not None) is Era.LEGACY
        if isinstance(message, Response):
            if not legacy:
                return EnvelopeError(
                    InvalidRequest("Invalid request: clients must not send responses"),
                    message.id,
                )
            requests.start_soon(self._exchange, message)
        elif isinstance(message, Notification):
            if message.method == "notifications/cancelled":
                self.cancel(message)
            elif legacy and message.method != "notifications/initialized":
                requests.start_soon(self._exchange, message)
        else:
            self.start(requests, message, legacy)
        return None

    async def refuse(self, refusal: EnvelopeError) -> None:
        """Answer a line that is not a message (its error, with its id when it has one)."""
        await self.dispatcher.refuse(refusal.error, refusal.request_id, StdioResponder(self.out))


class Servable(Protocol):
    """What stdio needs of a server: its dispatcher, and a way to run it (``Server`` and
    ``AsgiApp`` both fit)."""

    @property
    def dispatcher(self) -> Dispatcher: ...

    def open_runtime(self) -> AbstractAsyncContextManager[Runtime]: ...


async def serve_stdio(
    server: Servable,
    *,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    max_line: int = DEFAULT_MAX_LINE,
    grace: float = DEFAULT_GRACE,
    on_eof: Callable[[], object] | None = None,
) -> None:
    """Serve ``server`` (or the server of an ASGI app) on stdin/stdout until EOF.

    It runs the server (``open_runtime``) for its lifetime, so tasks work over stdio too;
    they end when the connection does. On the way out it closes its own handles on fds 0 and
    1 and puts them back in blocking mode, as the process had them. ``on_eof`` is called
    once at end of input, when shutdown begins (the command starts its shutdown clock there).
    """
    async with AsyncExitStack() as stack:
        if stdin is None:
            stdin = stack.enter_context(_borrowed_fd(0))
            stack.push_async_callback(stdin.aclose)
        if stdout is None:
            stdout = stack.enter_context(_borrowed_fd(1))
            stack.push_async_callback(stdout.aclose)
        runtime = await stack.enter_async_context(server.open_runtime())
        await _serve(server.dispatcher, runtime, stdin, stdout, max_line, grace, on_eof)


async def _serve(
    dispatcher: Dispatcher,
    runtime: Runtime,
    stdin: trio.abc.ReceiveStream,
    stdout: trio.abc.SendStream,
    max_line: int,
    grace: float,
    on_eof: Callable[[], object] | None,
) -> None:
    out, lines = trio.open_memory_channel[bytes](256)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_writer, stdout, lines)
        async with out:
            session = _Session(dispatcher, runtime, out)
            async with trio.open_nursery() as requests:
                async for batch in _batches(stdin, max_line):
                    for line in batch:
                        refusal = session.take(requests, line)
                        if refusal is not None:
                            await session.refuse(refusal)
                if on_eof is not None:
                    on_eof()
                runtime.begin_draining()  # EOF: listen streams end now, with their final result
                with trio.move_on_after(grace):  # other in-flight requests finish, bounded
                    await session.idle.wait()
                requests.cancel_scope.cancel()


@contextmanager
def _borrowed_fd(fd: int) -> Iterator[trio.lowlevel.FdStream]:
    """An ``FdStream`` on a duplicate of ``fd``; on exit, ``fd``'s blocking mode comes back.

    trio makes the duplicate non-blocking, and the flag lives on the open file shared with
    ``fd``: left as it is, the shell (or a parent process) would find its terminal broken.
    """
    blocking = os.get_blocking(fd)
    try:
        yield trio.lowlevel.FdStream(os.dup(fd))
    finally:
        os.set_blocking(fd, blocking)
