"""``presa-trio proxy --upstream URL``: a Streamable HTTP proxy that records and checks every
message it forwards, as an ASGI app served by hypercorn's trio worker.

Every request, whatever its path, goes to the upstream URL (the MCP endpoint), its headers
as they came but for the hop-by-hop ones and ``Host``; the answer comes back the same way,
status and headers untouched (a 401's ``WWW-Authenticate`` included). An SSE body is passed
on event by event as it arrives, never gathered. Each request runs in a nursery with a task
that watches for the client's disconnect: it cancels the upstream exchange, whose socket is
closed on the way out; an upstream that ends its stream ends the client's response. What it
does not do: rewrite anything, pool connections, or speak WebSocket.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from itertools import count
from typing import Any

import trio

from .frames import SseSplitter
from .recorder import Passed, Recorder, header_map, parse_body, say
from .upstream import Upstream, UpstreamError, exchange, forwarded

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY = 16 * 1024 * 1024  # bytes of one request body (an MCP request is one message)
MAX_ANSWER = 64 * 1024 * 1024  # bytes of one non-streamed response body
BODY_TIMEOUT = 30.0  # seconds a client has to send its request body
INTERNAL_ERROR = -32603
REMEMBERED_CONNECTIONS = 4096  # client addresses numbered at once; the oldest are forgotten


class ProxyApp:
    """The ASGI app: one exchange upstream per request, recorded both ways."""

    def __init__(self, upstream: Upstream, recorder: Recorder) -> None:
        self.upstream = upstream
        self.recorder = recorder
        self._connections: dict[Any, int] = {}  # client address -> number, oldest first
        self._connection_numbers = count(1)
        self._exchanges = count(1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        else:  # a WebSocket: MCP has none; hypercorn answers 403 to a close before accept
            await send({"type": "websocket.close", "code": 1000})

    def _connection(self, scope: Scope) -> int:
        """The client connection's number, by its address: one per TCP connection. Only the
        newest ``REMEMBERED_CONNECTIONS`` addresses are kept (an address seen again after it
        was forgotten is a new connection by then), so a long run does not grow without end."""
        client = tuple(scope.get("client") or ("?", 0))
        number = self._connections.pop(client, None)
        if number is None:
            number = next(self._connection_numbers)
            if len(self._connections) >= REMEMBERED_CONNECTIONS:
                del self._connections[next(iter(self._connections))]
        self._connections[client] = number  # moved to the newest end
        return number

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        conn, number = self._connection(scope), next(self._exchanges)
        body = await _request_body(receive)
        if body is None:
            return  # the client left (or was too slow) before its request was complete
        if len(body) > MAX_BODY:
            await _answer(send, 413, b"request body over %d bytes\n" % MAX_BODY, "text/plain")
            return
        message, text = parse_body(body)
        http = {"method": scope["method"], "headers": header_map(scope["headers"])}
        await self.recorder.record(Passed("client", message, text, conn, number, http))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_until_disconnect, receive, nursery.cancel_scope)
            answer = Passed("server", conn=conn, exchange=number)
            try:
                await self._forward(scope, body, send, message, answer)
            finally:
                nursery.cancel_scope.cancel()

    async def _forward(
        self, scope: Scope, body: bytes, send: Send, request: Any, template: Passed
    ) -> None:
        try:
            async with exchange(self.upstream, scope["method"], scope["headers"], body) as answer:
                template.http = {"status": answer.status, "headers": header_map(answer.headers)}
                start = {
                    "type": "http.response.start",
                    "status": answer.status,
                    "headers": forwarded(answer.headers),
                }
                content_type = template.http["headers"].get("content-type", "")
                if content_type.startswith("text/event-stream"):
                    await send(start)
                    await self._stream(answer.chunks, send, template)
                else:
                    await self._whole(answer.chunks, start, send, template)
        except UpstreamError as exc:
            say(str(exc))
            await _bad_gateway(send, request, str(exc))

    async def _stream(self, chunks: Any, send: Send, template: Passed) -> None:
        """An SSE body: each event recorded, then its bytes passed on, as they arrive."""
        splitter = SseSplitter()
        events = 0
        try:
            async for chunk in chunks:
                for event in splitter.feed(chunk):
                    events += 1
                    message, text = parse_body(event.data)
                    sse = {"id": event.event_id, "event": event.name}
                    await self.recorder.record(
                        _with(template, message, text, {k: v for k, v in sse.items() if v})
                    )
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except UpstreamError as exc:
            # Broken upstream, broken stream: returning without the body's end makes hypercorn
            # close the connection, so the client sees the break (and may resume), not an end.
            say(str(exc))
            await trio.lowlevel.checkpoint()
        else:
            if not events:  # a stream that carried nothing still had a status
                await self.recorder.record(_with(template, None, None, {}))
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _whole(self, chunks: Any, start: Message, send: Send, template: Passed) -> None:
        """A JSON (or empty, or other) body: gathered, recorded, then passed on whole."""
        parts: list[bytes] = []
        size = 0
        async for chunk in chunks:
            size += len(chunk)
            if size > MAX_ANSWER:
                raise UpstreamError(f"the upstream's answer is over {MAX_ANSWER} bytes")
            parts.append(chunk)
        body = b"".join(parts)
        message, text = parse_body(body)
        await self.recorder.record(_with(template, message, text, {}))
        start["headers"] = [*start["headers"], (b"content-length", str(len(body)).encode())]
        await send(start)
        await send({"type": "http.response.body", "body": body, "more_body": False})


def _with(template: Passed, message: Any, text: str | None, sse: dict[str, str]) -> Passed:
    return Passed(
        template.direction, message, text, template.conn, template.exchange, template.http, sse
    )


async def _request_body(receive: Receive) -> bytes | None:
    """The request's body (read on past ``MAX_BODY`` only to know it is too big); None when
    the client disconnects or takes over ``BODY_TIMEOUT``."""
    parts: list[bytes] = []
    size = 0
    with trio.move_on_after(BODY_TIMEOUT):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            if size <= MAX_BODY:
                parts.append(message.get("body", b""))
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(parts)
    return None


async def _until_disconnect(receive: Receive, exchange_scope: trio.CancelScope) -> None:
    """Cancel ``exchange_scope`` when the client goes away."""
    while (await receive())["type"] != "http.disconnect":
        pass
    exchange_scope.cancel()


async def _bad_gateway(send: Send, request: Any, reason: str) -> None:
    """502: with a JSON-RPC error when the request was a JSON-RPC message."""
    if isinstance(request, dict) and request.get("jsonrpc") == "2.0":
        error = {"code": INTERNAL_ERROR, "message": f"presa-trio proxy: {reason}"}
        body = {"jsonrpc": "2.0", "id": request.get("id"), "error": error}
        await _answer(send, 502, json.dumps(body).encode(), "application/json")
    else:
        await _answer(send, 502, f"presa-trio proxy: {reason}\n".encode(), "text/plain")


async def _answer(send: Send, status: int, body: bytes, content_type: str) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
