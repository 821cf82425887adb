"""Streamable HTTP (wire §13) as an ASGI 3 app, for ``hypercorn --worker-class trio``.

The edge only moves bytes: admission of Host/Origin, POST-only, a body limit, parsing, and a
``Responder`` that answers JSON or, once a notification is sent, SSE. The lifespan owns the
server's background nursery. A client disconnect cancels the request's cancel scope.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import trio

from .._wire import sse
from .._wire.admission import HostPolicy, refuse_reason
from .._wire.headers import RoutingHeaders
from .._wire.jsonrpc import EnvelopeError, Notification, encode, error_message, parse_message
from ..errors import InvalidRequest, RequestTooLarge

if TYPE_CHECKING:
    from .._server import Server

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

logger = logging.getLogger("presa_trio.http")

_JSON = [(b"content-type", b"application/json")]
_PLAIN = [(b"content-type", b"text/plain; charset=utf-8")]
DEFAULT_MAX_BODY = 4 * 1024 * 1024


class AsgiApp:
    """The MCP endpoint of one ``Server``.

    ``path`` is the endpoint (``/mcp``); ``max_body`` caps a request body in bytes (413
    beyond it, read no further); ``host_policy`` guards against DNS rebinding (loopback
    names only by default).
    """

    def __init__(
        self,
        server: Server,
        *,
        path: str = "/mcp",
        max_body: int = DEFAULT_MAX_BODY,
        host_policy: HostPolicy | None = None,
    ) -> None:
        self.server = server
        self.path = path
        self.max_body = max_body
        self.host_policy = host_policy if host_policy is not None else HostPolicy()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    # ------------------------------------------------------------------ lifespan

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        started = False
        try:
            async with self.server.running():
                await send({"type": "lifespan.startup.complete"})
                started = True
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as exc:  # trio.Cancelled is a BaseException: it propagates
            logger.exception("lifespan failed")
            phase = "shutdown" if started else "startup"
            await send({"type": f"lifespan.{phase}.failed", "message": f"presa_trio: {exc!r}"})
            return
        await send({"type": "lifespan.shutdown.complete"})

    # ------------------------------------------------------------------ http

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] != self.path:
            await _plain(send, 404, b"Not Found")
            return
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
        reason = refuse_reason(self.host_policy, host, origin)
        if reason is not None:
            await _json(send, 403, error_message(None, InvalidRequest(f"Forbidden: {reason}")))
            return
        if scope["method"] != "POST":
            await _plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST")])
            return
        body = await self._read_body(receive, send)
        if body is None:
            return
        try:
            message = parse_message(body)
        except EnvelopeError as exc:
            await _json(send, exc.error.http_status, error_message(exc.request_id, exc.error))
            return
        if isinstance(message, Notification):
            await _plain(send, 202, b"")  # accepted; stdio is where notifications matter
            return
        responder = HttpResponder(send)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
            await self.server.dispatcher.serve(message, RoutingHeaders(scope["headers"]), responder)
            nursery.cancel_scope.cancel()

    async def _read_body(self, receive: Receive, send: Send) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                error = RequestTooLarge(f"Request body exceeds {self.max_body} bytes")
                await _json(send, error.http_status, error_message(None, error))
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _cancel_on_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


class HttpResponder:
    """Answers one request as JSON, or as SSE from its first notification on."""

    __slots__ = ("_send", "_streaming")

    def __init__(self, send: Send) -> None:
        self._send = send
        self._streaming = False

    async def _start_stream(self) -> None:
        self._streaming = True
        await self._send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})

    async def notify(self, message: dict[str, Any]) -> None:
        if not self._streaming:
            await self._start_stream()
        await self._send(
            {"type": "http.response.body", "body": sse.event(encode(message)), "more_body": True}
        )

    async def keepalive(self) -> None:
        if not self._streaming:
            await self._start_stream()
        await self._send({"type": "http.response.body", "body": sse.KEEPALIVE, "more_body": True})

    async def finish(self, message: dict[str, Any], status: int) -> None:
        if self._streaming:
            await self._send({"type": "http.response.body", "body": sse.event(encode(message))})
        else:
            await _json(self._send, status, message)


async def _json(send: Send, status: int, message: dict[str, Any]) -> None:
    body = encode(message)
    headers = [*_JSON, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _plain(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [*_PLAIN, (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
