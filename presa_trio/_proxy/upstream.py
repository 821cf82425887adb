"""The proxy's upstream side: one HTTP/1.1 exchange with the MCP server, its response body
read chunk by chunk as it arrives (h11 over a trio socket, TLS for ``https``).

One connection per exchange (``connection: close``), as presa's client does: a proxy for
inspecting traffic gains nothing from pooling and keeps every stream independent. Not here:
redirects, HTTP/2, request bodies sent in pieces (an MCP request is one JSON message).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11
import trio

Headers = list[tuple[bytes, bytes]]
CONNECT_TIMEOUT = 10.0  # seconds to reach the upstream and read its response head
READ_SIZE = 65536

#: Headers that belong to one hop (RFC 9110 §7.6.1) and never cross the proxy, with the
#: framing headers each side sets for itself.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
        b"host",
    }
)


class UpstreamError(Exception):
    """The upstream could not be reached, or broke the exchange before its response head."""


def forwarded(headers: Sequence[tuple[bytes, bytes]]) -> Headers:
    """``headers`` without the hop-by-hop ones (and those the ``Connection`` header names)."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.split(b",")
    }
    return [(n, v) for n, v in headers if n.lower() not in HOP_BY_HOP | named]


@dataclass(frozen=True)
class Upstream:
    """Where the proxy forwards to: the MCP endpoint's URL, parsed once."""

    url: str
    host: str
    port: int
    tls: bool
    target: str  # the path and query every request is sent to
    authority: str  # the Host header the upstream is sent

    @classmethod
    def parse(cls, url: str) -> Upstream:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--upstream must be an http(s) URL, got {url!r}")
        tls = parts.scheme == "https"
        try:
            port = parts.port or (443 if tls else 80)
        except ValueError:
            raise ValueError(f"--upstream has a bad port: {url!r}") from None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(url, parts.hostname, port, tls, target, parts.netloc.rpartition("@")[2])


@dataclass
class Response:
    """The upstream's response head, and its body as it arrives."""

    status: int
    headers: Headers
    chunks: AsyncIterator[bytes]


@asynccontextmanager
async def exchange(
    upstream: Upstream, method: str, headers: Headers, body: bytes
) -> AsyncIterator[Response]:
    """Send one request upstream; yield its response while the body is read. Connecting and
    sending are bounded by ``CONNECT_TIMEOUT`` (``UpstreamError`` past it); the response is
    not: a stream may rightly stay open for hours, and the caller's cancel scope ends it."""
    stream = await _connect(upstream)
    async with stream:
        connection = h11.Connection(h11.CLIENT)
        sent = [
            (b"host", upstream.authority.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            # The proxy reads every body it passes on, so it asks for them uncompressed.
            *[(n, v) for n, v in forwarded(headers) if n.lower() != b"accept-encoding"],
        ]
        request = h11.Request(method=method, target=upstream.target, headers=sent)
        try:
            with trio.move_on_after(CONNECT_TIMEOUT) as waited:
                await stream.send_all(connection.send(request) + connection.send(h11.Data(body)))
                await stream.send_all(connection.send(h11.EndOfMessage()))
            if waited.cancelled_caught:
                raise UpstreamError(f"{upstream.url} took no request within {CONNECT_TIMEOUT:g} s")
            # Not bounded here: a JSON answer's head comes when the answer is ready, which a
            # slow tool may rightly take minutes for; the client's disconnect ends the wait.
            head = await _next_event(connection, stream)
            while isinstance(head, h11.InformationalResponse):
                head = await _next_event(connection, stream)
        except (h11.ProtocolError, trio.BrokenResourceError, ssl.SSLError, OSError) as exc:
            raise UpstreamError(f"{upstream.url} broke the exchange: {_why(exc)}") from None
        if not isinstance(head, h11.Response):
            raise UpstreamError(f"{upstream.url} closed the connection without a response")
        yield Response(head.status_code, list(head.headers), _body(connection, stream))


async def _connect(upstream: Upstream) -> trio.abc.Stream:
    with trio.move_on_after(CONNECT_TIMEOUT):
        try:
            stream: trio.abc.Stream = await trio.open_tcp_stream(upstream.host, upstream.port)
        except OSError as exc:
            raise UpstreamError(f"cannot connect to {upstream.url}: {_why(exc)}") from None
        if upstream.tls:
            context = ssl.create_default_context()
            stream = trio.SSLStream(stream, context, server_hostname=upstream.host)
        return stream
    raise UpstreamError(f"cannot connect to {upstream.url} within {CONNECT_TIMEOUT:g} s")


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    cause = exc.__cause__ if not str(exc) and exc.__cause__ is not None else exc
    return str(cause) or type(cause).__name__


async def _next_event(connection: h11.Connection, stream: trio.abc.Stream) -> object:
    await trio.lowlevel.checkpoint()
    while True:
        event = connection.next_event()
        if event is not h11.NEED_DATA:
            return event
        connection.receive_data(bytes(await stream.receive_some(READ_SIZE)))


async def _body(connection: h11.Connection, stream: trio.abc.Stream) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive; it ends at the end of the message, and raises
    ``UpstreamError`` if the connection breaks before that."""
    while True:
        try:
            event = await _next_event(connection, stream)
        except (h11.ProtocolError, trio.BrokenResourceError, ssl.SSLError, OSError) as exc:
            raise UpstreamError(f"the upstream broke the response: {_why(exc)}") from None
        if isinstance(event, h11.Data):
            yield bytes(event.data)
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return
