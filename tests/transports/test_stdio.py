"""The stdio transport in process: framing, concurrency, cancellation, EOF, tasks, listen."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio
import trio.testing

from fixtures.conformance import build_server
from presa_trio import Context, Server
from presa_trio._transports.stdio import serve_stdio
from presa_trio.ext.tasks import EXTENSION_ID

V = "2026-07-28"


def meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        **extra,
    }


class Peer:
    """The client end: writes lines to the server's stdin, reads lines from its stdout."""

    def __init__(self, stdin: trio.abc.SendStream, stdout: trio.abc.ReceiveStream) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self.buffer = b""

    async def send(self, message: Any) -> None:
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        await self.stdin.send_all(raw + b"\n")

    async def request(
        self, request_id: Any, method: str, params: dict[str, Any] | None = None, **meta_extra: Any
    ) -> None:
        body = dict(params or {})
        body.setdefault("_meta", meta(**meta_extra))
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": body})

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.stdout.receive_some()
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def response(self, request_id: Any) -> dict[str, Any]:
        while "id" not in (message := await self.receive()) or message["id"] != request_id:
            pass
        return message


@asynccontextmanager
async def connected(server: Server, **options: Any) -> AsyncIterator[tuple[Peer, trio.Event]]:
    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    server_out, from_server = trio.testing.memory_stream_one_way_pair()
    done = trio.Event()

    async def run() -> None:
        await serve_stdio(server, stdin=server_in, stdout=server_out, **options)
        await server_out.aclose()
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        yield Peer(to_server, from_server), done
        await to_server.aclose()  # EOF


async def test_round_trip_and_bad_lines() -> None:
    async with connected(build_server()) as (peer, done):
        await peer.request(1, "server/discover")
        assert (await peer.receive())["result"]["supportedVersions"] == [V]
        await peer.send(b"{nope")
        assert await peer.receive() == {
            "jsonrpc": "2.0",
            "error": {"code": -32700, "message": "Parse error: body is not valid JSON"},
        }
        await peer.send([])
        assert (await peer.receive())["error"]["code"] == -32600
        await peer.send(
            {"jsonrpc": "2.0", "id": "x", "method": "nope/nope", "params": {"_meta": meta()}}
        )
        assert (await peer.receive()) == {
            "jsonrpc": "2.0",
            "id": "x",
            "error": {"code": -32601, "message": "Method not found: nope/nope"},
        }
        await peer.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}})
        assert (await peer.receive())["error"]["code"] == -32602
        await peer.send({"jsonrpc": "2.0", "method": "notifications/whatever"})  # ignored
        await peer.request(4, "tools/list")
        assert (await peer.receive())["id"] == 4
    assert done.is_set()


async def test_line_limit() -> None:
    async with connected(build_server(), max_line=200) as (peer, _):
        await peer.send(b"{" + b" " * 500 + b"}")
        assert (await peer.receive())["error"]["code"] == -32600
        await peer.request(1, "server/discover")
        assert (await peer.receive())["id"] == 1


class Recorded(trio.abc.SendStream):
    """stdout as a list of the writes the server made."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        self.writes.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def _calls(ids: range, times: int = 1) -> bytes:
    params = {"name": "echo", "arguments": {"text": "x", "times": times}, "_meta": meta()}
    return b"".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}).encode()
        + b"\n"
        for i in ids
    )


async def _writes_for(chunks: list[bytes]) -> list[bytes]:
    """The writes a server makes for requests read in ``chunks`` (then EOF)."""
    server = Server("echo")

    @server.tool(thread=False, structured_output=False)  # answers of a known size
    def echo(text: str, times: int) -> str:
        """Answers at once."""
        return text * times

    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    stdout = Recorded()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(serve_stdio, server, stdin=server_in, stdout=stdout))
        for chunk in chunks:
            await to_server.send_all(chunk)
            await trio.testing.wait_all_tasks_blocked()
        await to_server.aclose()
    return stdout.writes


async def test_the_answers_to_one_read_leave_in_one_write() -> None:
    writes = await _writes_for([_calls(range(5)), _calls(range(5, 8))])
    assert len(writes) == 2  # one per read, not one per answer
    for write, ids in zip(writes, (range(5), range(5, 8)), strict=True):
        assert write.endswith(b"\n")
        answers = [json.loads(line) for line in write.splitlines()]
        assert sorted(answer["id"] for answer in answers) == list(ids)
        assert all(answer["result"]["content"][0]["text"] == "x" for answer in answers)


async def test_a_write_gathers_about_a_pipes_buffer_and_no_more() -> None:
    writes = await _writes_for([_calls(range(7), 20_000)])  # answers of about 20 KB each
    lines = [line for write in writes for line in write.splitlines()]
    assert sorted(json.loads(line)["id"] for line in lines) == list(range(7))
    # a write takes answers until they pass WRITE_BATCH (64 KiB): four of them at most
    assert [write.count(b"\n") for write in writes] == [4, 3]


def slow_server(log: list[str]) -> Server:
    server = Server("slow")

    @server.tool()
    async def wait(ctx: Context, seconds: float) -> str:
        """Waits, reporting progress."""
        try:
            for step in range(3):
                await ctx.progress(step + 1, 3)
                await trio.sleep(seconds / 3)
        finally:
            log.append(f"finally {seconds}")
        return f"waited {seconds}"

    return server


async def test_requests_run_concurrently_and_lines_never_interleave(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    log: list[str] = []
    async with connected(slow_server(log)) as (peer, _):
        for i in range(20):
            await peer.request(
                i,
                "tools/call",
                {"name": "wait", "arguments": {"seconds": 20 - i}},
                progressToken=f"p{i}",
            )
        finished = []
        while len(finished) < 20:
            message = await peer.receive()  # every line parses: no interleaving
            if "id" in message:
                finished.append(message["id"])
        assert finished == list(reversed(range(20)))  # the shortest wait answers first


async def test_notifications_cancelled_cancels_only_that_request(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    log: list[str] = []
    async with connected(slow_server(log)) as (peer, _):
        await peer.request(
            "a", "tools/call", {"name": "wait", "arguments": {"seconds": 100}}, progressToken="pa"
        )
        await peer.request(
            "b", "tools/call", {"name": "wait", "arguments": {"seconds": 200}}, progressToken="pb"
        )
        assert (await peer.receive())["method"] == "notifications/progress"
        assert (await peer.receive())["method"] == "notifications/progress"
        await peer.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": "a", "reason": "changed my mind"},
            }
        )
        await peer.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": "never-sent"},
            }
        )
        seen = []
        while "id" not in (message := await peer.receive()):
            seen.append(message["params"]["progressToken"])
        assert message["id"] == "b" and set(seen) == {"pb"}
        assert log == ["finally 100", "finally 200"]


async def test_eof_lets_in_flight_requests_finish_within_the_grace(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    log: list[str] = []
    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    server_out, from_server = trio.testing.memory_stream_one_way_pair()
    peer = Peer(to_server, from_server)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_stdio(slow_server(log), stdin=server_in, stdout=server_out, grace=10)
        )
        await peer.request(1, "tools/call", {"name": "wait", "arguments": {"seconds": 3}})
        await peer.request(2, "tools/call", {"name": "wait", "arguments": {"seconds": 60}})
        await to_server.aclose()
        assert (await peer.response(1))["result"]["content"][0]["text"] == "waited 3"
    assert log == ["finally 3", "finally 60"]  # the long one was cancelled after the grace
    assert trio.current_time() < 20


TASKS = {"elicitation": {}, "extensions": {EXTENSION_ID: {}}}


async def task_status(peer: Peer, task_id: str, wanted: str) -> dict[str, Any]:
    """Poll tasks/get over the pipe until the task shows ``wanted``."""
    with trio.fail_after(5):
        while True:
            await peer.request("poll", "tasks/get", {"taskId": task_id, "_meta": meta(TASKS)})
            task: dict[str, Any] = (await peer.receive())["result"]
            if task["status"] == wanted:
                return task


async def test_tasks_work_over_stdio() -> None:
    async with connected(build_server()) as (peer, _):
        arguments = {"name": "confirm_delete", "arguments": {"filename": "x"}, "_meta": meta(TASKS)}
        await peer.request(1, "tools/call", arguments)
        created = (await peer.receive())["result"]
        assert created["resultType"] == "task"
        task_id = created["taskId"]
        task = await task_status(peer, task_id, "input_required")
        assert list(task["inputRequests"]) == ["confirm-delete"]
        yes = {"confirm-delete": {"action": "accept", "content": {"confirm": True}}}
        update = {"taskId": task_id, "inputResponses": yes, "_meta": meta(TASKS)}
        await peer.request(3, "tasks/update", update)
        assert (await peer.receive())["result"]["resultType"] == "complete"
        task = await task_status(peer, task_id, "completed")
        assert task["result"]["content"][0]["text"] == "Delete confirmed: true"


async def test_listen_over_stdio_and_cancel_it() -> None:
    server = build_server()
    async with connected(server) as (peer, _):
        await peer.request(
            "sub", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
        )
        ack = await peer.receive()
        assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub"}
        await peer.request(2, "tools/call", {"name": "test_trigger_tool_change"})
        first, second = await peer.receive(), await peer.receive()
        by_kind = {("id" in m): m for m in (first, second)}
        assert by_kind[False]["method"] == "notifications/tools/list_changed"
        assert by_kind[False]["params"]["_meta"] == {
            "io.modelcontextprotocol/subscriptionId": "sub"
        }
        await peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "sub"}}
        )
        await trio.testing.wait_all_tasks_blocked()
        assert server.notify_tools_changed() == 0  # the listener is gone: nobody to tell
        await peer.request(3, "server/discover")
        assert (await peer.receive())["id"] == 3  # nothing more was sent for the listen


def test_the_transport_never_prints() -> None:
    # A static guarantee worth keeping: the transport module never prints.
    from pathlib import Path

    source = Path(__file__).resolve().parents[2] / "presa_trio" / "_transports" / "stdio.py"
    assert "print(" not in source.read_text()


async def test_eof_ends_listen_streams_at_once(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    server_out, from_server = trio.testing.memory_stream_one_way_pair()
    peer = Peer(to_server, from_server)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: serve_stdio(build_server(), stdin=server_in, stdout=server_out))
        await peer.request(
            "sub", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
        )
        await peer.receive()  # the acknowledgement
        await to_server.aclose()
        final = await peer.response("sub")
        assert final["result"]["resultType"] == "complete"
    assert trio.current_time() < 1  # no grace period was needed
