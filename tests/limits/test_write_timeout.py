"""A client that never reads its answer is dropped within the write timeout, and the drop is logged
with that timeout; everyone else is served meanwhile."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing
from support.asgi_scope import http_scope

from presa_trio import AsgiApp, Context, Server, Timeouts
from presa_trio.testing import Client, open_client


async def never_reading(
    app: AsgiApp,
    client: Client,
    method: str,
    params: dict[str, Any],
    stop_at: str,
    meta: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One raw ASGI exchange whose ``send`` never returns for the message type ``stop_at``;
    the client neither reads on nor disconnects. Returns what the server tried to send."""
    message = client.message(method, params, meta=meta)
    headers = [(k.encode(), v.encode()) for k, v in client.headers_for(message)]
    scope = http_scope([*headers, (b"host", b"localhost:8000")])
    pending = [json.dumps(message).encode()]
    attempted: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            await trio.lowlevel.checkpoint()
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        await trio.sleep_forever()  # never a disconnect
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(sent: dict[str, Any]) -> None:
        attempted.append(dict(sent))
        if sent["type"] == stop_at:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()

    await app(scope, receive, send)
    return attempted


def slow_reader_server(cleaned: list[str]) -> Server:
    server = Server("readers", "1")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Streams progress for a long while."""
        try:
            for step in range(1, 1_000):
                await ctx.progress(step)
                await trio.sleep(1)
        finally:
            cleaned.append("chatty")
        return "done"

    @server.tool(thread=False)  # on the loop: a worker thread would let MockClock jump
    def plain() -> str:
        """Answers at once."""
        return "plain"

    return server


@pytest.mark.parametrize(
    ("tool", "stop_at", "meta"),
    [
        ("plain", "http.response.body", None),
        ("plain", "http.response.start", None),
        ("chatty", "http.response.body", {"progressToken": "p"}),
    ],
    ids=["json-body", "json-start", "sse-stream"],
)
async def test_a_client_that_never_reads_is_dropped_within_the_write_timeout(
    tool: str,
    stop_at: str,
    meta: dict[str, Any] | None,
    mock_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    mock_clock.autojump_threshold = 0
    caplog.set_level(logging.INFO, logger="presa_trio.http")
    cleaned: list[str] = []
    app = slow_reader_server(cleaned).asgi_app(timeouts=Timeouts(write=2.0))
    async with open_client(app) as client:
        params: dict[str, Any] = {"name": tool}
        dropped: list[float] = []
        attempted: list[dict[str, Any]] = []

        async def stuck() -> None:
            start = trio.current_time()
            attempted.extend(await never_reading(app, client, "tools/call", params, stop_at, meta))
            dropped.append(trio.current_time() - start)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stuck)
            await trio.testing.wait_all_tasks_blocked()
            # Others are served while the stuck exchange waits on its reader.
            assert (await client.call_tool("plain"))["content"][0]["text"] == "plain"
            assert dropped == []
        # Within the write deadline: never before it, at most two of its keeper's looks
        # after it (a look every tenth of the shorter timeout: 0.2 s here).
        (after,) = dropped
        assert 2.0 - 1e-9 <= after <= 2.0 + 2 * 0.2 + 1e-9
        assert attempted[-1]["type"] == stop_at  # nothing was written after the stuck write
        if tool == "chatty":
            assert cleaned == ["chatty"]  # the handler was cancelled, its cleanup ran
        drops = [r for r in caplog.records if "stopped reading" in r.getMessage()]
        assert len(drops) == 1
        assert (await client.call_tool("plain"))["content"][0]["text"] == "plain"


async def test_the_drop_is_logged_with_the_write_timeout(
    mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The log line of a dropped reader names how long it was waited for (the write
    timeout), whatever the clock reads."""
    mock_clock.autojump_threshold = 0
    caplog.set_level(logging.INFO, logger="presa_trio.http")
    app = slow_reader_server([]).asgi_app(timeouts=Timeouts(write=2.0))
    async with open_client(app) as client:
        await trio.sleep(100)  # the run has been up for a while
        await never_reading(app, client, "tools/call", {"name": "plain"}, "http.response.body")
    assert [r.getMessage() for r in caplog.records] == [
        "a client stopped reading for 2.0 s; its request is dropped"
    ]
