"""A client disconnect cancels the request's handler at once; cleanup runs; nothing is sent. A
disconnect during the final write does not interrupt it, and a request's disconnect watcher
ends with the request."""

from __future__ import annotations

import json

import trio
import trio.testing
from support.raw_peer import Peer, call_json, http_scope, writer_server

from presa_trio import Context, Server, Validation
from presa_trio.testing import open_client


def slow_server(log: list[str], entered: trio.Event) -> Server:
    server = Server("slow", validation=Validation(outbound=True))

    @server.tool()
    async def wait_forever(ctx: Context) -> str:
        """Waits until cancelled."""
        entered.set()
        try:
            await ctx.progress(1)
            await trio.sleep_forever()
        except trio.Cancelled:
            log.append("cancelled")
            raise
        finally:
            log.append("finally")
        return "unreachable"

    return server


async def test_disconnect_cancels_the_handler(mock_clock: trio.testing.MockClock) -> None:
    log: list[str] = []
    entered = trio.Event()
    async with open_client(slow_server(log, entered)) as client:
        async with client.stream("tools/call", {"name": "wait_forever"}) as stream:
            await entered.wait()
            stream.disconnect()
            await trio.testing.wait_all_tasks_blocked()
        assert log == ["cancelled", "finally"]
        assert stream.status == 0  # no progress token: nothing was ever sent


async def test_disconnect_mid_stream_sends_nothing_more(mock_clock: trio.testing.MockClock) -> None:
    log: list[str] = []
    entered = trio.Event()
    async with open_client(slow_server(log, entered)) as client:
        message = {"progressToken": 7}
        async with client.stream("tools/call", {"name": "wait_forever"}, meta=message) as stream:
            first = await stream.next()
            assert first["method"] == "notifications/progress"
            stream.disconnect()
        assert log == ["cancelled", "finally"]
        assert stream.headers["content-type"] == "text/event-stream"


async def test_a_disconnect_during_the_final_write_does_not_interrupt_it() -> None:
    app = writer_server([]).asgi_app()
    async with app.lifespan():
        peer = Peer([call_json("quick", {})])
        peer.disconnect_during_final = True
        with trio.fail_after(10):
            await app(http_scope(name="quick"), peer.receive, peer.send)
        assert peer.disconnect.is_set()
        assert peer.final_send_returned
        assert [m["status"] for m in peer.starts()] == [200]
        (final,) = peer.bodies()
        assert json.loads(final["body"])["result"]["content"][0]["text"] == "quick"


async def test_a_requests_disconnect_watcher_ends_with_it() -> None:
    # Each request is watched for its client's disconnect by a task of its own nursery, from
    # the moment its body is in, also one answered without ever waiting (the watcher's is
    # the second ``receive``). A server that never says ``http.disconnect`` after the answer
    # (ASGI says it should) keeps no watcher alive: the request's end cancels it.
    server = writer_server([])

    @server.tool(thread=False)
    def instant() -> str:
        """Answers without ever waiting."""
        return "instant"

    app = server.asgi_app()
    async with app.lifespan():
        for name in ("instant", "quick"):
            peer = Peer([call_json(name, {})])  # never says http.disconnect
            with trio.fail_after(10):
                await app(http_scope(name=name), peer.receive, peer.send)
            assert peer.receives == 2, name
            assert not peer.disconnect.is_set()
            (final,) = peer.bodies()
            assert json.loads(final["body"])["result"]["content"][0]["text"] == name
