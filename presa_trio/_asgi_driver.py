"""In-process HTTP for the test clients (``presa_trio.testing``): one ASGI exchange at a time
with an app, no sockets, and the errors a test client raises."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

import trio

from ._transports.asgi import AsgiApp


class SchemaViolationError(AssertionError):
    """A message broke the schema of its protocol version."""


class RpcError(Exception):
    """The server answered a JSON-RPC error."""

    def __init__(self, error: Mapping[str, Any], status: int) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')} (HTTP {status})")
        self.code: int = error["code"]
        self.message: str = error.get("message", "")
        self.data: Any = error.get("data")
        self.status = status


@final
@dataclass
class HttpResult:
    """One HTTP exchange: status, headers (lower-case names), body and the messages in it."""

    status: int
    headers: dict[str, str]
    body: bytes
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def response(self) -> dict[str, Any] | None:
        """The JSON-RPC response (the message with an ``id``), if any."""
        for message in self.messages:
            if "id" in message and "method" not in message:
                return message
        return None

    @property
    def notifications(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if "method" in m and "id" not in m]


def _parse_body(content_type: str, body: bytes) -> list[dict[str, Any]]:
    """JSON or SSE bodies to messages (SSE: one ``data:`` line per event)."""
    if content_type.startswith("text/event-stream"):
        return [
            json.loads(line[5:])
            for line in body.decode().splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
    if content_type.startswith("application/json") and body:
        return [json.loads(body)]
    return []


class Exchange:
    """The client half of one ASGI HTTP call, with a switch to disconnect."""

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body
        self.disconnected = trio.Event()
        self.started = trio.Event()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks_send, self.chunks = trio.open_memory_channel[bytes](64)

    async def receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            await trio.lowlevel.checkpoint()
            return {"type": "http.request", "body": body, "more_body": False}
        await self.disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Mapping[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
            self.started.set()
        elif message["type"] == "http.response.body":
            if message.get("body"):
                await self.chunks_send.send(message["body"])  # backpressure, never drop
            if not message.get("more_body", False):
                self.chunks_send.close()


def asgi_scope(method: str, path: str, headers: list[tuple[str, str]]) -> dict[str, Any]:
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    if not any(k == b"host" for k, _ in raw):
        raw.append((b"host", b"127.0.0.1:8000"))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": raw,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def drive(
    app: AsgiApp,
    body: bytes | str = b"",
    headers: list[tuple[str, str]] | None = None,
    *,
    method: str = "POST",
    path: str = "/mcp",
) -> HttpResult:
    """One complete HTTP exchange with ``app``; the raw tool for malformed-input tests."""
    data = body.encode() if isinstance(body, str) else body
    exchange = Exchange(data)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            app, asgi_scope(method, path, headers or []), exchange.receive, exchange.send
        )
        payload = b"".join([chunk async for chunk in exchange.chunks])
        exchange.disconnected.set()
    content_type = exchange.headers.get("content-type", "")
    return HttpResult(
        exchange.status, exchange.headers, payload, _parse_body(content_type, payload)
    )


@final
class Stream:
    """One in-flight request's response, message by message, that the client can abandon.

    Read it with ``await stream.next()`` (``EOFError`` at its end) or ``async for message in
    stream`` (the loop ends when the server ends the response).
    """

    def __init__(self, exchange: Exchange, check: Callable[[dict[str, Any]], None]) -> None:
        self._exchange = exchange
        self._check = check
        self._buffer = b""
        #: The id of the last event read that had one (a resumable stream's).
        self.last_event_id: str | None = None

    @property
    def status(self) -> int:
        """The HTTP status, once the response has started (0 before)."""
        return self._exchange.status

    @property
    def headers(self) -> dict[str, str]:
        return self._exchange.headers

    def disconnect(self) -> None:
        """Drop the connection, as a client that goes away does."""
        self._exchange.disconnected.set()

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        try:
            return await self.next()
        except EOFError:
            raise StopAsyncIteration from None

    async def next(self) -> dict[str, Any]:
        """The next message; raises ``EOFError`` when the server ends the response."""
        await self._exchange.started.wait()
        if not self._exchange.headers.get("content-type", "").startswith("text/event-stream"):
            body = b"".join([chunk async for chunk in self._exchange.chunks])
            if not body:
                raise EOFError("response ended")
            message: dict[str, Any] = json.loads(body)
            self._check(message)
            return message
        while b"\n\n" not in self._buffer:
            try:
                self._buffer += await self._exchange.chunks.receive()
            except trio.EndOfChannel:
                raise EOFError("stream ended") from None
        frame, self._buffer = self._buffer.split(b"\n\n", 1)
        for line in frame.decode().splitlines():
            if line.startswith("id:"):
                self.last_event_id = line[3:].strip()
            elif line.startswith("data:") and line[5:].strip():
                event: dict[str, Any] = json.loads(line[5:])
                self._check(event)
                return event
        return await self.next()  # a comment (keep-alive) frame, or a priming event
