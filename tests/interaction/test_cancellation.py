"""A client disconnect cancels the request's handler at once; cleanup runs; nothing is sent."""

from __future__ import annotations

import trio
import trio.testing

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
