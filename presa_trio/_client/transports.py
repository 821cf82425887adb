"""Three ways to reach a server, one interface: a server in this process (its ASGI app, run
with its lifespan), a URL (Streamable HTTP over h11 and trio sockets, TLS for ``https``),
and a spawned process (newline-delimited JSON-RPC on its stdin/stdout).

A transport moves one request at a time and hands every message that arrives before its
response (notifications, an older-era server's requests) to the caller; it knows nothing of
eras, tasks or rounds (``_client/connection.py``). No new dependency: h11 and trio already
serve the server side. Not here: proxies, redirects, keep-alive (one connection a request).
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import h11
import trio

from .._asgi_driver import Exchange, asgi_scope
from .._protocol.era import SESSION_HEADER
from .._transports.stdio import LineBuffer
from .wire import ProtocolError, SseDecoder, kind_of, parse_message

OnMessage = Callable[[dict[str, Any]], Awaitable[None]]
Headers = list[tuple[str, str]]
MAX_LINE = 64 * 1024 * 1024  # bytes of one message from a spawned server
STOP_GRACE = 2.0  # seconds a spawned server has to exit at end of input, before it is killed


class TransportError(Exception):
    """The server could not be reached, or the connection broke."""


@dataclass
class Reply:
    """What came back for one request: the HTTP status (200 on stdio), the response (None
    when the body held none) and the session id the answer named, if any."""

    status: int
    response: dict[str, Any] | None
    session_id: str | None = None


class Transport(Protocol):
    async def request(
        self, message: dict[str, Any], headers: Headers, on_message: OnMessage
    ) -> Reply:
        """Send a request; return its response, passing what comes first to ``on_message``."""
        ...

    async def send(self, message: dict[str, Any], headers: Headers) -> None:
        """Send a notification, or an answer to a server's request."""
        ...

    async def end_session(self, headers: Headers) -> None:
        """End an older-era HTTP session (``DELETE``); nothing on stdio."""
        ...


async def read_body(
    status: int,
    headers: Mapping[str, str],
    chunks: AsyncIterator[bytes],
    request_id: Any,
    on_message: OnMessage,
) -> Reply:
    """The one reader of an HTTP answer, in process or over a socket: a JSON body, or an SSE
    stream read until the response to ``request_id``."""
    session_id = headers.get(SESSION_HEADER)
    content_type = headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        decoder = SseDecoder()
        async for chunk in chunks:
            for message in decoder.feed(chunk):
                if kind_of(message) == "response" and message.get("id") == request_id:
                    return Reply(status, message, session_id)
                await on_message(message)
        return Reply(status, None, session_id)
    body = b"".join([chunk async for chunk in chunks])
    if content_type.startswith("application/json") and body.strip():
        return Reply(status, parse_message(body), session_id)
    return Reply(status, None, session_id)


class HttpExchanges:
    """A transport that speaks HTTP, in process or over a socket: every message is one
    exchange (``_exchange``), a request's answer read by ``read_body``."""

    async def _exchange(
        self, method: str, body: bytes, headers: Headers, request_id: Any, on_message: OnMessage
    ) -> Reply:
        raise NotImplementedError

    async def request(
        self, message: dict[str, Any], headers: Headers, on_message: OnMessage
    ) -> Reply:
        return await self._exchange("POST", _encode(message), headers, message["id"], on_message)

    async def send(self, message: dict[str, Any], headers: Headers) -> None:
        await self._exchange("POST", _encode(message), headers, None, _ignore)

    async def end_session(self, headers: Headers) -> None:
        await self._exchange("DELETE", b"", headers, None, _ignore)


# ---------------------------------------------------------------------------- in process


class AsgiTransport(HttpExchanges):
    """A presa_trio app in this process, driven like ``presa_trio.testing`` drives it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def _exchange(
        self, method: str, body: bytes, headers: Headers, request_id: Any, on_message: OnMessage
    ) -> Reply:
        exchange = Exchange(body)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                self.app,
                asgi_scope(method, self.app.path, headers),
                exchange.receive,
                exchange.send,
            )
            try:
                await exchange.started.wait()
                async with aclosing(_channel(exchange.chunks)) as chunks:
                    return await read_body(
                        exchange.status, exchange.headers, chunks, request_id, on_message
                    )
            finally:
                exchange.disconnected.set()


async def _channel(chunks: trio.MemoryReceiveChannel[bytes]) -> AsyncGenerator[bytes, None]:
    async for chunk in chunks:
        yield chunk


async def _ignore(message: dict[str, Any]) -> None:
    await trio.lowlevel.checkpoint()


def _encode(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode()


@asynccontextmanager
async def open_in_process(target: Any) -> AsyncIterator[AsgiTransport]:
    """Run a ``Server`` (or its app) here, lifespan and all, for as long as the block."""
    from .._server import Server

    app = target.asgi_app() if isinstance(target, Server) else target
    async with app.lifespan():
        yield AsgiTransport(app)


# ---------------------------------------------------------------------------- HTTP


class HttpTransport(HttpExchanges):
    """Streamable HTTP to ``url``: one HTTP/1.1 connection per message (h11)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TransportError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        default = 443 if self.tls else 80
        self.authority = parts.netloc.rpartition("@")[2] if self.port != default else self.host

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[trio.abc.Stream]:
        try:
            stream: trio.abc.Stream = await trio.open_tcp_stream(self.host, self.port)
        except OSError as exc:
            raise TransportError(f"cannot connect to {self.url}: {_refusal(exc)}") from None
        if self.tls:
            stream = trio.SSLStream(stream, ssl.create_default_context(), server_hostname=self.host)
        async with stream:
            yield stream

    async def _exchange(
        self, method: str, body: bytes, headers: Headers, request_id: Any, on_message: OnMessage
    ) -> Reply:
        try:
            async with self._connected() as stream:
                connection = h11.Connection(h11.CLIENT)
                sent = [
                    ("host", self.authority),
                    ("content-length", str(len(body))),
                    ("connection", "close"),
                    ("user-agent", "presa-trio"),
                    *headers,
                ]
                await stream.send_all(
                    connection.send(h11.Request(method=method, target=self.target, headers=sent))
                )
                await stream.send_all(connection.send(h11.Data(data=body)))
                await stream.send_all(connection.send(h11.EndOfMessage()))
                event = await _next_event(connection, stream)
                while isinstance(event, h11.InformationalResponse):
                    event = await _next_event(connection, stream)
                if not isinstance(event, h11.Response):
                    raise TransportError(f"{self.url} answered no HTTP response")
                answer = {k.decode().lower(): v.decode("latin-1") for k, v in event.headers}
                # Closed here: a reader that has its response stops before the body ends.
                async with aclosing(_body(connection, stream)) as chunks:
                    return await read_body(
                        event.status_code, answer, chunks, request_id, on_message
                    )
        except (h11.RemoteProtocolError, trio.BrokenResourceError, ssl.SSLError) as exc:
            raise TransportError(f"the connection to {self.url} broke: {_why(exc)}") from None
        except OSError as exc:
            raise TransportError(
                f"the connection to {self.url} failed: {exc.strerror or exc}"
            ) from None


def _refusal(exc: OSError) -> str:
    """Why a connection could not be made: trio's ``open_tcp_stream`` says only that every
    attempt failed, and keeps each attempt's own error in its cause."""
    attempts = getattr(exc.__cause__, "exceptions", ())
    reasons = {
        os.strerror(a.errno) if a.errno else str(a) for a in attempts if isinstance(a, OSError)
    }
    return ", ".join(sorted(reasons)) or exc.strerror or str(exc)


def _why(exc: BaseException) -> str:
    """What broke a connection: trio wraps a TLS failure (a certificate not trusted, say)
    in ``BrokenResourceError``, whose own text is empty."""
    cause = exc.__cause__ if str(exc) == "" and exc.__cause__ is not None else exc
    return str(cause) or type(cause).__name__


async def _next_event(connection: h11.Connection, stream: trio.abc.Stream) -> Any:
    await trio.lowlevel.checkpoint()
    while True:
        event = connection.next_event()
        if event is not h11.NEED_DATA:
            return event
        connection.receive_data(bytes(await stream.receive_some(65536)))


async def _body(connection: h11.Connection, stream: trio.abc.Stream) -> AsyncGenerator[bytes, None]:
    while True:
        event = await _next_event(connection, stream)
        if isinstance(event, h11.Data):
            yield bytes(event.data)
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return


# ---------------------------------------------------------------------------- stdio


class StdioTransport:
    """A server process spawned by this one, spoken to on its stdin/stdout (wire §14).

    Requests go one at a time; a line for another id (a late answer to a probe given up on)
    is dropped. The process's stderr is this process's: its logs reach the user."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._lines = LineBuffer(MAX_LINE)
        self._pending: list[bytes | None] = []
        # One request reads the output at a time: two callers in two tasks wait their turn.
        self._turn = trio.Lock()

    async def _line(self) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        while not self._pending:
            chunk = bytes(await self._stdout.receive_some(65536))
            if not chunk:
                self._pending = self._lines.close()
                if not self._pending:
                    with trio.move_on_after(STOP_GRACE):  # its exit status, if it is ending
                        await self.process.wait()
                    code = self.process.poll()
                    status = f" (exit status {code})" if code is not None else ""
                    raise TransportError(f"the server process closed its output{status}")
                break
            self._pending = self._lines.feed(chunk)
        line = self._pending.pop(0)
        if line is None:
            raise ProtocolError(f"the server wrote a line over {MAX_LINE} bytes")
        return parse_message(line)

    async def _write(self, message: Mapping[str, Any]) -> None:
        try:
            await self._stdin.send_all(_encode(message) + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise TransportError("the server process stopped reading its input") from None

    async def request(
        self, message: dict[str, Any], headers: Headers, on_message: OnMessage
    ) -> Reply:
        async with self._turn:
            await self._write(message)
            while True:
                received = await self._line()
                if kind_of(received) != "response":
                    await on_message(received)
                elif received.get("id") == message["id"]:
                    return Reply(200, received)

    async def send(self, message: dict[str, Any], headers: Headers) -> None:
        await self._write(message)

    async def end_session(self, headers: Headers) -> None:
        await trio.lowlevel.checkpoint()


@asynccontextmanager
async def open_spawned(
    command: list[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[StdioTransport]:
    """Spawn ``command`` (in ``cwd``, with ``env`` over this process's environment); at the
    end close its input, give it ``STOP_GRACE`` seconds to exit, then kill it. A command
    that cannot start is a ``TransportError``."""
    if not command:
        raise TransportError("no command to start")
    try:
        process = await trio.lowlevel.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
    except OSError as exc:
        raise TransportError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
    try:
        yield StdioTransport(process)
    finally:
        with trio.CancelScope(shield=True):
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.aclose()
            with trio.move_on_after(STOP_GRACE):
                await process.wait()
            if process.poll() is None:
                process.kill()
                await process.wait()
            await process.stdout.aclose()
