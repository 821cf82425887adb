"""A tiny HTTP/1.1 client on trio sockets and h11, for talking to a real server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import h11
import trio

V = "2026-07-28"


def mcp_request(
    method: str,
    params: dict[str, Any] | None = None,
    request_id: int | str = 1,
    capabilities: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> tuple[bytes, list[tuple[str, str]]]:
    body = dict(params or {})
    body["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        **(meta or {}),
    }
    headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", V),
        ("mcp-method", method),
    ]
    name = body.get("name") or body.get("uri")
    if method in ("tools/call", "prompts/get", "resources/read") and isinstance(name, str):
        headers.append(("mcp-name", name))
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}
    return json.dumps(message).encode(), headers


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    messages: list[dict[str, Any]] = field(default_factory=list)


class Connection:
    """One keep-alive-less HTTP/1.1 exchange whose body can be read incrementally."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
        self.status = 0
        self.headers: dict[str, str] = {}
        self._buffer = b""
        #: The id of the last event read that had one (a resumable stream's).
        self.last_event_id: str | None = None

    async def _event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.stream.receive_some(65536))
                continue
            return event

    async def send(
        self, port: int, body: bytes, headers: list[tuple[str, str]], method: str
    ) -> None:
        host = (
            [] if any(k.lower() == "host" for k, _ in headers) else [("host", f"127.0.0.1:{port}")]
        )
        all_headers = [*host, ("content-length", str(len(body))), *headers]
        await self.stream.send_all(
            self.h11.send(h11.Request(method=method, target="/mcp", headers=all_headers))
        )
        try:
            await self.stream.send_all(self.h11.send(h11.Data(data=body)))
            await self.stream.send_all(self.h11.send(h11.EndOfMessage()))
        except trio.BrokenResourceError:
            pass  # the server answered early (e.g. 413) and closed: read its answer
        event = await self._event()
        assert isinstance(event, h11.Response), event
        self.status = event.status_code
        self.headers = {k.decode(): v.decode() for k, v in event.headers}

    async def chunk(self) -> bytes | None:
        event = await self._event()
        if isinstance(event, h11.Data):
            return bytes(event.data)
        return None

    async def next_message(self) -> dict[str, Any]:
        """The next ``data:`` event of an SSE body (comments skipped); EOFError at the end."""
        while True:
            while b"\n\n" not in self._buffer:
                data = await self.chunk()
                if data is None:
                    raise EOFError
                self._buffer += data
            frame, self._buffer = self._buffer.split(b"\n\n", 1)
            for line in frame.split(b"\n"):
                if line.startswith(b"id: "):
                    self.last_event_id = line[4:].decode()
                if line.startswith(b"data:") and line[5:].strip():  # not a priming event
                    message: dict[str, Any] = json.loads(line[5:])
                    return message


@asynccontextmanager
async def open_exchange(
    port: int, body: bytes, headers: list[tuple[str, str]], method: str = "POST"
) -> AsyncIterator[Connection]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        connection = Connection(stream)
        await connection.send(port, body, headers, method)
        yield connection


async def request(
    port: int, body: bytes, headers: list[tuple[str, str]], method: str = "POST"
) -> Response:
    async with open_exchange(port, body, headers, method) as connection:
        chunks = []
        while (data := await connection.chunk()) is not None:
            chunks.append(data)
    payload = b"".join(chunks)
    response = Response(connection.status, connection.headers, payload)
    content_type = connection.headers.get("content-type", "")
    if content_type.startswith("application/json"):
        response.messages = [json.loads(payload)]
    elif content_type.startswith("text/event-stream"):
        response.messages = [
            json.loads(line[5:])
            for line in payload.split(b"\n")
            if line.startswith(b"data:") and line[5:].strip()
        ]
    return response


async def call(port: int, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
    body, headers = mcp_request(method, params, **kw)
    response = await request(port, body, headers)
    final = response.messages[-1]
    assert "result" in final, final
    return final["result"]


async def tool(port: int, name: str, arguments: dict[str, Any] | None = None) -> Any:
    """Call a tool that answers JSON data; returns that data, read from its text block (also
    the value when an ``int`` return's structuredContent wraps it as ``{"result": ...}``)."""
    result = await call(port, "tools/call", {"name": name, "arguments": arguments or {}})
    return json.loads(result["content"][0]["text"])
