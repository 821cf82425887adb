"""``Dispatcher.serve`` and ``refuse`` on their own, with a responder that records what it got.

The dispatcher is the one place errors become responses: each request ends in exactly one
``finish`` (or none, when cancelled), with the right code and status.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import trio

from presa_trio import Context, InvalidParams, Runtime, Server, ToolResult
from presa_trio._protocol.jsonrpc import Request, parse_message
from presa_trio.errors import ParseError

V = "2026-07-28"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "kernel", "version": "3"}


class Recorder:
    """A ``Responder`` that records every call (messages arrive encoded; it decodes them)."""

    def __init__(self) -> None:
        self.notified: list[dict[str, Any]] = []
        self.keepalives = 0
        self.finished: list[tuple[dict[str, Any], int]] = []

    async def notify(self, data: bytes) -> None:
        self.notified.append(json.loads(data))  # recorded first: a cancelled send still counts
        await trio.lowlevel.checkpoint()

    async def keepalive(self) -> None:
        self.keepalives += 1  # recorded first: a cancelled send still counts
        await trio.lowlevel.checkpoint()

    async def finish(
        self, data: bytes, status: int, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        assert b"\n" not in data  # compact, one line
        self.finished.append((json.loads(data), status))  # recorded first, before the await
        await trio.lowlevel.checkpoint()

    @property
    def only(self) -> tuple[dict[str, Any], int]:
        assert len(self.finished) == 1, self.finished
        return self.finished[0]


def params(**extra: Any) -> dict[str, Any]:
    return {
        **extra,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "kernel-test", "version": "1"},
        },
    }


def call(request_id: int | str, name: str) -> Request:
    return Request(request_id, "tools/call", params(name=name, arguments={}))


class World:
    def __init__(self) -> None:
        self.own_meta = {"dev.example/trace": "abc"}
        self.entered = trio.Event()
        self.log: list[str] = []


def build(world: World) -> Server:
    server = Server("kernel", "3")

    @server.tool()
    async def with_meta() -> ToolResult:
        """Returns a result carrying a _meta dict of its own (the same dict every time)."""
        await trio.lowlevel.checkpoint()
        return ToolResult(content=[{"type": "text", "text": "m"}], meta=world.own_meta)

    @server.tool()
    def bug() -> str:
        """An ordinary bug."""
        raise ValueError("secret detail")

    @server.tool()
    async def grouped() -> str:
        """A protocol error that arrives inside an exception group."""
        await trio.lowlevel.checkpoint()
        raise ExceptionGroup("from a nursery", [InvalidParams("Bad widget", {"w": 1})])

    @server.tool()
    async def hangs() -> str:
        """Waits forever, cleaning up when cancelled."""
        world.entered.set()
        try:
            await trio.sleep_forever()
        finally:
            world.log.append("finally")

    return server


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def server(world: World) -> Server:
    return build(world)


@pytest.fixture
async def runtime(server: Server) -> AsyncIterator[Runtime]:
    async with server.open_runtime() as runtime:
        yield runtime


async def test_results_are_stamped_once_and_the_handlers_meta_is_left_alone(
    server: Server, runtime: Runtime, world: World
) -> None:
    expected = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "resultType": "complete",
            "content": [{"type": "text", "text": "m"}],
            "_meta": {SERVER_INFO_KEY: SERVER_INFO, "dev.example/trace": "abc"},
        },
    }
    for _ in range(2):  # the handler hands back the same _meta dict each time
        recorder = Recorder()
        await server.dispatcher.serve(call(1, "with_meta"), None, recorder, runtime)
        assert recorder.only == (expected, 200)
        assert recorder.notified == [] and recorder.keepalives == 0
        assert world.own_meta == {"dev.example/trace": "abc"}  # not mutated

    recorder = Recorder()
    await server.dispatcher.serve(
        Request("d", "server/discover", params()), None, recorder, runtime
    )
    message, status = recorder.only
    assert status == 200 and message["id"] == "d"
    assert message["result"]["resultType"] == "complete"
    assert message["result"]["_meta"] == {SERVER_INFO_KEY: SERVER_INFO}


async def test_a_bug_is_one_internal_error_without_detail(
    server: Server, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    await server.dispatcher.serve(call(2, "bug"), None, recorder, runtime)
    assert recorder.only == (
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "Internal error"}},
        500,
    )
    assert "secret detail" not in str(recorder.finished)
    assert [r.getMessage() for r in caplog.records] == ["handling tools/call failed"]


async def test_a_protocol_error_inside_a_group_is_answered_as_itself(
    server: Server, runtime: Runtime
) -> None:
    recorder = Recorder()
    await server.dispatcher.serve(call(3, "grouped"), None, recorder, runtime)
    assert recorder.only == (
        {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32602, "message": "Bad widget", "data": {"w": 1}},
        },
        400,
    )


async def test_a_cancelled_request_finishes_nothing_and_reraises(
    server: Server, runtime: Runtime, world: World
) -> None:
    recorder = Recorder()
    raised: list[BaseException] = []
    reached_the_end = False

    async def cancel_when_entered(scope: trio.CancelScope) -> None:
        await world.entered.wait()
        scope.cancel()

    with trio.fail_after(5):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_when_entered, scope)
                try:
                    await server.dispatcher.serve(call(4, "hangs"), None, recorder, runtime)
                except trio.Cancelled as exc:
                    raised.append(exc)
                    raise
                reached_the_end = True
    assert scope.cancelled_caught  # the Cancelled went all the way out to its scope
    assert len(raised) == 1 and not reached_the_end
    assert recorder.finished == [] and recorder.notified == []
    assert world.log == ["finally"]


async def test_refuse_shapes_a_transport_error_without_an_id(server: Server) -> None:
    recorder = Recorder()
    await server.dispatcher.refuse(ParseError("Parse error: nope"), None, recorder)
    message, status = recorder.only
    assert status == 400
    assert message == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error: nope"}}
    assert "id" not in message

    with_id = Recorder()
    await server.dispatcher.refuse(ParseError("Parse error"), 9, with_id)
    assert with_id.only == (
        {"jsonrpc": "2.0", "id": 9, "error": {"code": -32700, "message": "Parse error"}},
        400,
    )


async def test_serving_without_a_runtime_is_503(server: Server) -> None:
    recorder = Recorder()
    request = parse_message(
        b'{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"bug"}}'
    )
    assert isinstance(request, Request)
    await server.dispatcher.serve(request, None, recorder, None)
    assert recorder.only == (
        {
            "jsonrpc": "2.0",
            "id": "r",
            "error": {
                "code": -32603,
                "message": "Server is not running: its lifespan has not started",
                "data": {"retryable": True},
            },
        },
        503,
    )


async def test_notifications_reach_the_responder_before_the_one_finish() -> None:
    server = Server("notes")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Reports progress."""
        await ctx.progress(1, 2)
        return "done"

    async with server.open_runtime() as own:
        recorder = Recorder()
        request = Request(5, "tools/call", params(name="chatty"))
        request.params["_meta"]["progressToken"] = "p"
        await server.dispatcher.serve(request, None, recorder, own)
    assert recorder.notified == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "p", "progress": 1, "total": 2},
        }
    ]
    message, status = recorder.only
    assert status == 200 and message["result"]["content"] == [{"type": "text", "text": "done"}]
