"""The older era on stdio: ``initialize`` makes the process the session; each message is
classified on its own (``server/discover`` never locks the era, a modern ``_meta`` is served
as 2026-07-28 even inside a session), pushed requests go out as lines and the answers come
back as lines, change notifications follow the session's subscriptions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing
from support.sessions_app import build

from presa_trio import serve_stdio

MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Pipe:
    def __init__(self, to_server: trio.abc.SendStream, from_server: trio.abc.ReceiveStream) -> None:
        self.to_server = to_server
        self.from_server = from_server
        self.buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        await self.to_server.send_all(json.dumps(message).encode() + b"\n")

    async def line(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.from_server.receive_some(65536)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def request(
        self, request_id: int | str, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.line()


@asynccontextmanager
async def stdio_server() -> AsyncIterator[Pipe]:
    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    server_out, from_server = trio.testing.memory_stream_one_way_pair()

    async def run() -> None:
        await serve_stdio(build(), stdin=server_in, stdout=server_out)
        await server_out.aclose()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            yield Pipe(to_server, from_server)
            await to_server.aclose()


INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"sampling": {}, "elicitation": {}},
    "clientInfo": {"name": "stdio-test", "version": "1"},
}


async def test_discover_then_initialize_then_both_eras() -> None:
    async with stdio_server() as pipe:
        discovered = await pipe.request(1, "server/discover", {"_meta": MODERN})
        assert discovered["result"]["supportedVersions"] == ["2026-07-28"]
        opened = await pipe.request(2, "initialize", INIT)
        assert opened["result"]["protocolVersion"] == "2025-06-18"
        assert opened["result"]["capabilities"]["logging"] == {}
        await pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert await pipe.request(3, "ping") == {"jsonrpc": "2.0", "id": 3, "result": {}}
        listed = await pipe.request(4, "tools/list", {})
        assert "resultType" not in listed["result"]
        modern = await pipe.request(5, "tools/list", {"_meta": MODERN})
        assert modern["result"]["resultType"] == "complete"
        again = await pipe.request(6, "initialize", INIT)
        assert again["error"] == {
            "code": -32600,
            "message": "Invalid request: this session is already initialized",
        }


async def test_a_pushed_request_is_answered_on_stdin() -> None:
    async with stdio_server() as pipe:
        await pipe.request(1, "initialize", INIT)
        await pipe.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "ask_model", "arguments": {"prompt": "?"}},
            }
        )
        pushed = await pipe.line()
        assert pushed["method"] == "sampling/createMessage"
        assert pushed["params"] == {
            "messages": [{"role": "user", "content": {"type": "text", "text": "?"}}],
            "maxTokens": 50,
        }
        answer = {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"}
        await pipe.send({"jsonrpc": "2.0", "id": pushed["id"], "result": answer})
        final = await pipe.line()
    assert final == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {
            "content": [{"type": "text", "text": "model said yes"}],
            "structuredContent": {"result": "model said yes"},
        },
    }


async def test_cancelled_ends_the_call_unanswered_and_subscriptions_reach_stdout() -> None:
    async with stdio_server() as pipe:
        await pipe.request(1, "initialize", INIT)
        await pipe.send(
            {
                "jsonrpc": "2.0",
                "id": "s",
                "method": "tools/call",
                "params": {"name": "sleeper", "arguments": {}, "_meta": {"progressToken": 1}},
            }
        )
        progress = await pipe.line()
        assert progress["method"] == "notifications/progress"
        await pipe.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s"}}
        )
        # On stdio a cancelled request is not answered at all: the next line answers 2.
        subscribed = await pipe.request(2, "resources/subscribe", {"uri": "test://watched"})
        assert subscribed == {"jsonrpc": "2.0", "id": 2, "result": {}}
        await pipe.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "touch", "arguments": {"uri": "test://watched"}},
            }
        )
        seen = [await pipe.line() for _ in range(3)]
    by_kind = {m.get("method", "result"): m for m in seen}
    assert by_kind["notifications/resources/updated"]["params"] == {"uri": "test://watched"}
    assert by_kind["notifications/tools/list_changed"] == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }
    assert by_kind["result"]["id"] == 3


async def test_a_response_without_a_session_is_refused() -> None:
    async with stdio_server() as pipe:
        await pipe.send({"jsonrpc": "2.0", "id": 9, "result": {}})
        refused = await pipe.line()
    assert refused == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {"code": -32600, "message": "Invalid request: clients must not send responses"},
    }
