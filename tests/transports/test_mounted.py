"""``AsgiApp.mounted``: one ASGI app that sends a prefix to the MCP app and the rest to a host
app, and runs the server's lifespan around the host's (for hosts with no ``lifespan=`` hook)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import trio
import trio.testing
from support.asgi_scope import exchange

from presa_trio import Server
from presa_trio._process.shutdown import ShutdownBound
from presa_trio.testing import Client

Message = dict[str, Any]


class Host:
    """A host app that records its lifespan and answers every other request 204."""

    def __init__(
        self, *, startup: str = "complete", lifespan: bool = True, stopping: float = 0
    ) -> None:
        self.startup = startup
        self.lifespan = lifespan
        self.stopping = stopping  # how long its own shutdown takes, in seconds
        self.seen: list[str] = []
        self.server_ran_at_startup: bool | None = None
        self.probe: Any = None

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            if not self.lifespan:
                raise RuntimeError("no lifespan here")
            while True:
                event = (await receive())["type"]
                self.seen.append(event)
                if event == "lifespan.startup":
                    self.server_ran_at_startup = self.probe() is not None
                    await send({"type": f"lifespan.startup.{self.startup}", "message": "no"})
                    if self.startup == "failed":
                        return
                else:
                    self.server_ran_at_startup = self.probe() is not None
                    await trio.sleep(self.stopping)
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        self.seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


class Lifespan:
    """The ASGI server's side of the lifespan protocol, by hand."""

    def __init__(self) -> None:
        self.to_app, self.app_reads = trio.open_memory_channel[Message](math.inf)
        self.app_says, self.answers = trio.open_memory_channel[Message](math.inf)

    async def send(self, message: Message) -> None:
        self.app_says.send_nowait(message)

    async def say(self, event: str, within: float = 5) -> str:
        self.to_app.send_nowait({"type": f"lifespan.{event}"})
        with trio.fail_after(within):
            answer: str = (await self.answers.receive())["type"]
        return answer


def server_and_host(host: Host) -> tuple[Any, Any]:
    server = Server("mounted")

    @server.tool()
    async def hello(name: str) -> str:
        """Greets."""
        return f"hello {name}"

    mcp_app = server.asgi_app()
    host.probe = lambda: mcp_app.runtime
    return mcp_app, mcp_app.mounted(host, at="/deploy")


async def call(app: Any, mcp_app: Any, path: str) -> int:
    client = Client(mcp_app)
    message = client.message("tools/call", {"name": "hello", "arguments": {"name": "x"}})
    body = json.dumps(message).encode()
    status, _ = await exchange(app, client.headers_for(message), body, path=path)
    return status


async def test_the_server_runs_around_the_host_and_the_prefix_is_routed_to_it() -> None:
    host = Host()
    mcp_app, app = server_and_host(host)
    lifespan = Lifespan()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, lifespan.app_reads.receive, lifespan.send)
        assert await lifespan.say("startup") == "lifespan.startup.complete"
        assert host.server_ran_at_startup is True  # the server started first
        assert await call(app, mcp_app, "/deploy/mcp") == 200
        assert await call(app, mcp_app, "/deployed/mcp") == 204  # not the prefix: the host's
        assert await call(app, mcp_app, "/mcp") == 204
        assert await lifespan.say("shutdown") == "lifespan.shutdown.complete"
        assert host.server_ran_at_startup is True  # still running at the host's shutdown
    assert host.seen == [
        "lifespan.startup",
        "/deployed/mcp",
        "/mcp",
        "lifespan.shutdown",
    ]
    assert mcp_app.runtime is None  # and stopped after it


async def test_the_shutdown_bound_is_lifted_once_the_server_stopped() -> None:
    ended: list[int] = []
    host = Host()
    mcp_app, app = server_and_host(host)
    mcp_app.shutdown_bound = ShutdownBound(0.2, exit=ended.append)
    lifespan = Lifespan()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, lifespan.app_reads.receive, lifespan.send)
        assert await lifespan.say("startup") == "lifespan.startup.complete"
        assert await lifespan.say("shutdown") == "lifespan.shutdown.complete"
    assert mcp_app.shutdown_bound.started  # the clock ran while it drained ...
    await trio.sleep(0.4)
    assert ended == []  # ... and never ended the process once the drain was done


async def test_a_host_whose_own_shutdown_outlasts_ten_seconds_is_not_ended_by_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Ending the process is its owner's call: a mounted app arms no shutdown bound unless
    its program asks for one, however long the host (Quart-Trio, say) takes to stop."""
    ended: list[int] = []
    host = Host(stopping=11.0)
    mcp_app, app = server_and_host(host)
    assert mcp_app.shutdown_bound.seconds is None
    mcp_app.shutdown_bound = ShutdownBound(mcp_app.shutdown_bound.seconds, exit=ended.append)
    lifespan = Lifespan()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, lifespan.app_reads.receive, lifespan.send)
        assert await lifespan.say("startup") == "lifespan.startup.complete"
        began = trio.current_time()
        assert await lifespan.say("shutdown", within=60) == "lifespan.shutdown.complete"
        assert trio.current_time() - began >= 11.0  # the host took its time, and was let
    assert host.seen == ["lifespan.startup", "lifespan.shutdown"]
    assert not mcp_app.shutdown_bound.started  # no clock ever ran
    assert ended == []


async def test_an_app_asked_for_a_shutdown_bound_starts_it_at_shutdown() -> None:
    """``asgi_app(shutdown_timeout=...)``: the opt-in for a program that runs hypercorn
    itself: its clock starts when the ASGI server says shutdown."""
    ended: list[int] = []
    server = Server("bounded")
    app = server.asgi_app(shutdown_timeout=10)
    assert app.shutdown_bound.seconds == 10
    app.shutdown_bound = ShutdownBound(60.0, exit=ended.append)
    lifespan = Lifespan()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, lifespan.app_reads.receive, lifespan.send)
        assert await lifespan.say("startup") == "lifespan.startup.complete"
        assert not app.shutdown_bound.started
        assert await lifespan.say("shutdown") == "lifespan.shutdown.complete"
    assert app.shutdown_bound.started
    assert ended == []


async def test_a_host_without_lifespan_support_still_gets_the_server_run() -> None:
    host = Host(lifespan=False)
    mcp_app, app = server_and_host(host)
    lifespan = Lifespan()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, lifespan.app_reads.receive, lifespan.send)
        assert await lifespan.say("startup") == "lifespan.startup.complete"
        assert await call(app, mcp_app, "/deploy/mcp") == 200
        assert await lifespan.say("shutdown") == "lifespan.shutdown.complete"
    assert mcp_app.runtime is None


async def test_a_failed_host_startup_is_reported_and_the_server_stopped() -> None:
    host = Host(startup="failed")
    mcp_app, app = server_and_host(host)
    lifespan = Lifespan()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, lifespan.app_reads.receive, lifespan.send)
        assert await lifespan.say("startup") == "lifespan.startup.failed"
    assert mcp_app.runtime is None
    assert lifespan.answers.statistics().current_buffer_used == 0  # nothing after "failed"


async def test_a_server_that_cannot_start_reports_startup_failed() -> None:
    host = Host()
    mcp_app, app = server_and_host(host)
    lifespan = Lifespan()
    # already running: a second run is refused
    async with mcp_app.lifespan(), trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, lifespan.app_reads.receive, lifespan.send)
        assert await lifespan.say("startup") == "lifespan.startup.failed"
    assert host.seen == []


@pytest.mark.parametrize("prefix", ["deploy", "/deploy/", ""])
def test_a_prefix_is_one_leading_slash_and_no_trailing_one(prefix: str) -> None:
    with pytest.raises(ValueError, match="a mount prefix is '/name'"):
        Server("x").asgi_app().mounted(Host(), at=prefix)
