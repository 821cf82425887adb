"""The stdio transport (wire §14): newline-delimited JSON-RPC on stdin/stdout.

Each request runs as its own task in one nursery; every line out goes through one writer, so
messages never interleave; ``notifications/cancelled`` cancels its request's scope. At EOF it
stops reading, gives in-flight requests a bounded grace, cancels the rest and returns. Logs
belong on stderr: nothing but MCP messages is ever written to stdout.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import trio

from .._wire.jsonrpc import (
    EnvelopeError,
    Notification,
    Request,
    RequestId,
    encode,
    error_message,
    parse_message,
)
from ..errors import RequestTooLarge

if TYPE_CHECKING:
    from .._server import Server

logger = logging.getLogger("presa_trio.stdio")

DEFAULT_MAX_LINE = 4 * 1024 * 1024
DEFAULT_GRACE = 5.0


class StdioResponder:
    """Writes one request's notifications and response as lines through the shared writer."""

    __slots__ = ("_out",)

    def __init__(self, out: trio.MemorySendChannel[bytes]) -> None:
        self._out = out

    async def notify(self, message: dict[str, Any]) -> None:
        await self._out.send(encode(message))

    async def keepalive(self) -> None:
        """stdio needs no keep-alive: the pipe stays open."""

    async def finish(self, message: dict[str, Any], status: int) -> None:
        await self._out.send(encode(message))


async def _lines(stream: trio.abc.ReceiveStream, max_line: int) -> AsyncIterator[bytes | None]:
    """Lines without their newline; None stands for a line that was too long (and skipped)."""
    buffer = bytearray()
    skipping = False
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            if buffer and not skipping:
                yield bytes(buffer)
            return
        buffer += chunk
        while True:
            end = buffer.find(b"\n")
            if end == -1:
                if len(buffer) > max_line:
                    if not skipping:
                        yield None
                    skipping = True
                    buffer.clear()
                break
            line = bytes(buffer[:end]).rstrip(b"\r")
            del buffer[: end + 1]
            if skipping:
                skipping = False
            elif len(line) > max_line:
                yield None
            elif line.strip():
                yield line


async def _writer(stdout: trio.abc.SendStream, lines: trio.MemoryReceiveChannel[bytes]) -> None:
    async with lines:
        async for line in lines:
            await stdout.send_all(line + b"\n")


class _Session:
    """The requests in flight on one stdio connection (not a protocol session: no state)."""

    def __init__(self, server: Server, out: trio.MemorySendChannel[bytes]) -> None:
        self.server = server
        self.out = out
        self.inflight: dict[RequestId, trio.CancelScope] = {}
        self.idle = trio.Event()
        self.idle.set()

    def start(self, nursery: trio.Nursery, request: Request) -> None:
        """Register the request as in flight now, then run it as its own task."""
        scope = trio.CancelScope()
        if not self.inflight:
            self.idle = trio.Event()
        self.inflight[request.id] = scope
        nursery.start_soon(self._serve, request, scope)

    async def _serve(self, request: Request, scope: trio.CancelScope) -> None:
        try:
            with scope:
                await self.server.dispatcher.serve(request, None, StdioResponder(self.out))
        finally:
            if self.inflight.get(request.id) is scope:
                del self.inflight[request.id]
            if not self.inflight:
                self.idle.set()

    def cancel(self, notification: Notification) -> None:
        params = notification.params
        request_id = params.get("requestId") if isinstance(params, dict) else None
        scope = self.inflight.get(request_id) if isinstance(request_id, int | str) else None
        if scope is not None:  # unknown or finished ids are ignored (wire §15.2)
            scope.cancel()


async def serve_stdio(
    server: Server,
    *,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    max_line: int = DEFAULT_MAX_LINE,
    grace: float = DEFAULT_GRACE,
) -> None:
    """Serve ``server`` on stdin/stdout (or the given streams) until EOF.

    It owns the server's background nursery (``server.running()``) for its lifetime, so
    tasks work over stdio too; they end when the connection does.
    """
    stdin = stdin if stdin is not None else trio.lowlevel.FdStream(os.dup(0))
    stdout = stdout if stdout is not None else trio.lowlevel.FdStream(os.dup(1))
    out, lines = trio.open_memory_channel[bytes](256)
    async with server.running(), trio.open_nursery() as nursery:
        nursery.start_soon(_writer, stdout, lines)
        async with out:
            session = _Session(server, out)
            async with trio.open_nursery() as requests:
                async for line in _lines(stdin, max_line):
                    await _handle(session, requests, line)
                server.bus.close()  # EOF: listen streams end now, with their final result
                with trio.move_on_after(grace):  # other in-flight requests finish, bounded
                    await session.idle.wait()
                requests.cancel_scope.cancel()


async def _handle(session: _Session, requests: trio.Nursery, line: bytes | None) -> None:
    if line is None:
        error = RequestTooLarge("Message exceeds the line limit")
        await session.out.send(encode(error_message(None, error)))
        return
    try:
        message = parse_message(line)
    except EnvelopeError as exc:
        await session.out.send(encode(error_message(exc.request_id, exc.error)))
        return
    if isinstance(message, Notification):
        if message.method == "notifications/cancelled":
            session.cancel(message)
        return
    session.start(requests, message)
