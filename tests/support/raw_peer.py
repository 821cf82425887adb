"""A raw HTTP peer for the ASGI app whose reads and writes the test controls (a body that stops
arriving, a client that stops reading), and a server whose tools write long answers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import trio
import trio.testing

from presa_trio import Context, Server, Validation
from support.asgi_scope import headers
from support.asgi_scope import http_scope as raw_scope

V = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def http_scope(method: str = "tools/call", name: str | None = None) -> dict[str, Any]:
    extra = {} if name is None else {"mcp_name": name}
    raw = [(b"host", b"127.0.0.1:8000")]
    raw += [(k.encode(), v.encode()) for k, v in headers(method, **extra)]
    return raw_scope(raw)


class Peer:
    """The client side of one raw ASGI exchange, with switches for misbehaving."""

    def __init__(self, chunks: list[bytes], *, body_stalls: bool = False) -> None:
        self.chunks = list(chunks)
        self.body_stalls = body_stalls  # after the chunks: never another byte
        self.disconnect = trio.Event()
        self.sent: list[dict[str, Any]] = []
        self.block_on_body = False
        self.disconnect_during_final = False
        self.final_send_returned = False
        self.receives = 0

    async def receive(self) -> dict[str, Any]:
        self.receives += 1
        if self.chunks:
            chunk = self.chunks.pop(0)
            await trio.lowlevel.checkpoint()
            more = bool(self.chunks) or self.body_stalls
            return {"type": "http.request", "body": chunk, "more_body": more}
        if self.body_stalls:
            await trio.sleep_forever()
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(dict(message))
        if message["type"] != "http.response.body":
            await trio.lowlevel.checkpoint()
            return
        if self.block_on_body:
            await trio.sleep_forever()
        final = not message.get("more_body", False)
        if final and self.disconnect_during_final:
            self.disconnect.set()  # the client goes away while the last write is in flight
            await trio.lowlevel.checkpoint()  # yields, as ``await trio.sleep(0)`` does
            await trio.lowlevel.checkpoint()
            await trio.testing.wait_all_tasks_blocked()
            self.final_send_returned = True
            return
        await trio.lowlevel.checkpoint()

    def starts(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if m["type"] == "http.response.start"]

    def bodies(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if m["type"] == "http.response.body"]


def call_json(name: str, arguments: Mapping[str, Any], **meta: Any) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": dict(arguments), "_meta": {**META, **meta}},
        }
    ).encode()


def writer_server(world: list[str]) -> Server:
    server = Server("writer", "1", validation=Validation(outbound=True), loop_warning=None)

    @server.tool()
    async def ticker(ctx: Context) -> str:
        """Reports progress forever, noting its cancellation."""
        try:
            step = 0
            while True:
                step += 1
                await ctx.progress(step)
                await trio.sleep(0.1)
        except trio.Cancelled:
            world.append("cancelled")
            raise

    @server.tool()
    async def quick() -> str:
        """Answers at once."""
        await trio.lowlevel.checkpoint()
        return "quick"

    return server
