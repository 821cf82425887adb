"""Body and write deadlines through the ASGI app, with a raw peer whose reads and writes the test
controls: a body that stops arriving gets one 408, a client that stops reading is dropped, a
request begun before the run leaves its deadlines to trio, and the body deadline does not bound
a request that takes longer."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
import trio
import trio.testing
from support.raw_peer import Peer, call_json, http_scope, writer_server

from fixtures.conformance import build_server
from presa_trio import Server, Timeouts, Validation


class Run(enum.Enum):
    """When the app's run (its lifespan) is on, for a request whose body stalls: the body's
    deadline is the request scope's own, on trio's clock, whatever the run does."""

    NONE = "none"  # never
    THROUGHOUT = "throughout"
    STARTS_DURING = "starts-during"
    ENDS_DURING = "ends-during"


@pytest.mark.parametrize("run", list(Run), ids=[run.value for run in Run])
async def test_a_body_that_stops_arriving_gets_one_408(
    run: Run, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0
    app = build_server().asgi_app(timeouts=Timeouts(body=0.5))
    body = call_json("test_simple_text", {})
    peer = Peer([body[:20]], body_stalls=True)
    elapsed: list[float] = []

    async def request() -> None:
        start = trio.current_time()
        await app(http_scope(name="test_simple_text"), peer.receive, peer.send)
        elapsed.append(trio.current_time() - start)

    with trio.fail_after(60):
        if run is Run.NONE:
            await request()
        elif run is Run.THROUGHOUT:
            async with app.lifespan():
                await request()
        else:
            async with trio.open_nursery() as nursery:
                if run is Run.STARTS_DURING:
                    nursery.start_soon(request)
                    await trio.sleep(0.2)
                    async with app.lifespan():
                        await trio.sleep(1)
                else:
                    async with app.lifespan():
                        nursery.start_soon(request)
                        await trio.sleep(0.2)
    (took,) = elapsed
    assert took == pytest.approx(0.5)
    assert [m["status"] for m in peer.starts()] == [408]
    (final,) = peer.bodies()
    assert not final.get("more_body", False)
    message = json.loads(final["body"])
    assert message == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Request body not received within 0.5 s"},
    }
    assert len(peer.sent) == 2


def patient_server() -> Server:
    server = Server("patient", "1", validation=Validation(outbound=True), loop_warning=None)

    @server.tool()
    async def patient() -> str:
        """Waits longer than the body deadline (``Timeouts(body=0.5)``)."""
        await trio.sleep(2.0)
        return "patient"

    return server


async def test_a_request_begun_before_the_run_leaves_its_deadlines_to_trio(
    mock_clock: trio.testing.MockClock,
) -> None:
    # Its body arrives once the run is on, so it is served; its tool then waits longer than
    # the body's deadline, which is lifted once the body is in: every deadline is the
    # request scope's own, on trio's clock, whether or not a run was on when it was set.
    mock_clock.autojump_threshold = 0
    app = patient_server().asgi_app(timeouts=Timeouts(body=0.5))
    peer = Peer([call_json("patient", {})])
    running, answered = trio.Event(), trio.Event()

    async def receive_once_running() -> dict[str, Any]:
        await running.wait()
        return await peer.receive()

    async def request() -> None:
        await app(http_scope(name="patient"), receive_once_running, peer.send)
        answered.set()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request)
            await trio.sleep(0.1)
            async with app.lifespan():
                running.set()
                await answered.wait()
    assert [m["status"] for m in peer.starts()] == [200]
    (final,) = peer.bodies()
    assert json.loads(final["body"])["result"]["content"][0]["text"] == "patient"


async def test_a_client_that_stops_reading_a_stream_is_dropped(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    world: list[str] = []
    app = writer_server(world).asgi_app(timeouts=Timeouts(write=0.5))
    async with app.lifespan():
        peer = Peer([call_json("ticker", {}, progressToken="p")])
        peer.block_on_body = True
        with trio.fail_after(60):
            await app(http_scope(name="ticker"), peer.receive, peer.send)
    assert world == ["cancelled"]  # the tool's scope was cancelled
    assert [m["status"] for m in peer.starts()] == [200]
    assert len(peer.bodies()) == 1  # the one write that never finished; nothing after it


async def test_a_client_that_stops_reading_a_json_response_is_dropped(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    app = writer_server([]).asgi_app(timeouts=Timeouts(write=0.5))
    async with app.lifespan():
        peer = Peer([call_json("quick", {})])
        peer.block_on_body = True
        start = trio.current_time()
        with trio.fail_after(60):
            await app(http_scope(name="quick"), peer.receive, peer.send)
        assert trio.current_time() - start == pytest.approx(0.5)  # the write's deadline
        assert [m["status"] for m in peer.starts()] == [200]
        assert len(peer.bodies()) == 1


async def test_the_body_deadline_does_not_bound_a_request_that_takes_longer(
    mock_clock: trio.testing.MockClock,
) -> None:
    # The request scope's deadline bounds the body's arrival; it is lifted once the body is
    # in, so a tool that outlasts ``body_timeout`` (a sleep, then a sync tool whose run in
    # the event loop lasts past it) still answers.
    mock_clock.autojump_threshold = 0
    server = patient_server()

    @server.tool(thread=False)
    def busy() -> str:
        """Outlasts the body deadline without waiting (the clock jumps under it)."""
        mock_clock.jump(2.0)
        return "busy"

    app = server.asgi_app(timeouts=Timeouts(body=0.5))
    async with app.lifespan():
        for name in ("patient", "busy"):
            peer = Peer([call_json(name, {})])
            with trio.fail_after(60):
                await app(http_scope(name=name), peer.receive, peer.send)
            assert [m["status"] for m in peer.starts()] == [200], name
            (final,) = peer.bodies()
            assert json.loads(final["body"])["result"]["content"][0]["text"] == name
