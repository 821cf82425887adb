"""One principal cannot shut the others out of a worker's own bounds: listen streams,
background work and worker threads each give a principal a share, and past it that principal
alone is refused (or, for threads, waits) while the others carry on.

Principals are the subjects of bearer tokens looked up in a table, as with an opaque-token
service; each client sends its own token. Threads are real; the tests prove what they claim by
what has entered and what still waits, never by timing.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio import Context, Limits, Server, Validation
from presa_trio.auth import AccessToken, BearerAuth
from presa_trio.testing import Client, RpcError, open_client

TOOLS = {"toolsListChanged": True}
ACK = "notifications/subscriptions/acknowledged"
RETRY = {"retryable": True}


class Table:
    """An opaque-token verifier: each token stands for the principal it names."""

    async def verify(self, token: str) -> AccessToken | None:
        await trio.lowlevel.checkpoint()
        return AccessToken(subject=token) if token in ("alice", "bob", "carol") else None


class Gates:
    """Work that says when it started and ends when the test opens its gate: a sync tool's
    thread, or background work (whose gates are trio events)."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self.background: dict[str, trio.Event] = {}
        self._changed = threading.Condition()

    def enter(self, tag: str) -> None:
        with self._changed:
            self.entered.append(tag)
            self._changed.notify_all()

    def block(self, tag: str) -> str:
        self.enter(tag)
        assert self.gates.setdefault(tag, threading.Event()).wait(10), f"{tag} never released"
        return tag

    def open(self, tag: str) -> None:
        self.gates.setdefault(tag, threading.Event()).set()
        self.background.setdefault(tag, trio.Event()).set()

    def _wait(self, tags: set[str], count: int) -> bool:
        with self._changed:
            return self._changed.wait_for(
                lambda: tags <= set(self.entered) and len(self.entered) >= count, 10
            )

    async def until(self, *tags: str, count: int = 0) -> None:
        """Until ``tags`` (or any ``count`` tags) have entered, and all else waits."""
        assert await trio.to_thread.run_sync(self._wait, set(tags), count), self.entered
        await trio.testing.wait_all_tasks_blocked()


def tenants(gates: Gates, **options: Any) -> Server:
    auth = BearerAuth(
        Table(), resource="https://mcp.example.com/mcp", authorization_servers=["https://a.example"]
    )
    server = Server("shares", "1", auth=auth, validation=Validation(outbound=True), **options)

    @server.tool()
    def hold(tag: str) -> str:
        """Blocks a worker thread until the test opens its gate."""
        return gates.block(tag)

    async def until_released(tag: str) -> None:
        gates.enter(tag)
        await gates.background.setdefault(tag, trio.Event()).wait()

    @server.tool()
    async def kick(ctx: Context, tag: str) -> str:
        """Starts background work that runs until the test opens its gate."""
        ctx.start_background(until_released, tag, name=tag)
        return "started"

    @server.tool()
    def kick_sync(ctx: Context, tag: str) -> str:
        """The same from a worker thread."""
        ctx.start_background(until_released, tag, name=tag)
        return "started"

    return server


@asynccontextmanager
async def principals(server: Server) -> AsyncIterator[tuple[Client, Client, Client]]:
    """Clients of one run of ``server``, for alice, bob and carol."""
    async with open_client(server, token="alice") as alice:
        yield alice, Client(alice.app, token="bob"), Client(alice.app, token="carol")


async def refused(client: Client, method: str, params: dict[str, Any]) -> tuple[Any, ...]:
    with pytest.raises(RpcError) as caught:
        await client.request(method, params)
    return caught.value.code, caught.value.status, caught.value.data


async def opened(streams: AsyncExitStack, client: Client) -> None:
    stream = await streams.enter_async_context(client.listen(TOOLS))
    assert (await stream.next())["method"] == ACK


# ------------------------------------------------------------------ listen streams


async def test_a_principal_holding_its_share_of_streams_leaves_the_rest_to_others() -> None:
    server = tenants(Gates(), limits=Limits(max_listeners=5, max_listeners_per_principal=3))
    listen = {"notifications": TOOLS}
    with trio.fail_after(10):
        async with principals(server) as (alice, bob, carol):
            runtime = alice.app.runtime
            assert runtime is not None
            async with AsyncExitStack() as streams:
                for _ in range(3):
                    await opened(streams, alice)
                assert await refused(alice, "subscriptions/listen", listen) == (
                    -32603,
                    503,
                    {**RETRY, "limit": "max_listen_streams_per_principal"},
                )
                await opened(streams, bob)
                await opened(streams, bob)
                assert await refused(carol, "subscriptions/listen", listen) == (
                    -32603,
                    503,
                    {**RETRY, "limit": "max_listen_streams"},
                )
                assert runtime.bus.streams.held_by("alice") == 3
                assert runtime.bus.streams.held_by("bob") == 2
                assert runtime.notify_tools_changed() == 5  # every admitted stream is live
            assert (runtime.bus.streams.total, runtime.bus.streams.holders) == (0, 0)


async def test_a_closed_stream_gives_its_place_back_to_its_principal() -> None:
    server = tenants(Gates(), limits=Limits(max_listeners=5, max_listeners_per_principal=2))
    with trio.fail_after(10):
        async with principals(server) as (alice, _, _), AsyncExitStack() as streams:
            await opened(streams, alice)
            async with alice.listen(TOOLS) as second:
                assert (await second.next())["method"] == ACK
                refusal = await refused(alice, "subscriptions/listen", {"notifications": TOOLS})
                assert refusal[2] == {**RETRY, "limit": "max_listen_streams_per_principal"}
            await opened(streams, alice)  # the place the closed stream held


async def test_clients_without_a_principal_are_bounded_by_the_totals_only() -> None:
    """A server that cannot tell its clients apart (no token, no ``principal`` function) has
    no one to be fair to: its anonymous clients hold no share, only the worker's bound."""
    assert Server("defaults").settings.limits.max_listeners_per_principal == 100
    server = Server("anonymous", limits=Limits(max_listeners=3, max_listeners_per_principal=1))

    @server.tool()
    def noop() -> str:
        """Nothing."""
        return "ok"

    with trio.fail_after(10):
        async with open_client(server) as first, AsyncExitStack() as streams:
            second = Client(first.app)
            await opened(streams, first)
            await opened(streams, first)  # past a share of one: none applies to ""
            await opened(streams, second)
            refusal = await refused(second, "subscriptions/listen", {"notifications": TOOLS})
            assert refusal == (-32603, 503, {**RETRY, "limit": "max_listen_streams"})


SHARES = [
    "max_listeners_per_principal",
    "max_background_per_principal",
    "max_threads_per_principal",
]


@pytest.mark.parametrize("share", SHARES)
def test_a_share_is_at_least_one(share: str) -> None:
    with pytest.raises(ValueError, match=share):
        Limits(**{share: 0})
    limits = Limits(**{share: None})
    assert getattr(Server("none", limits=limits).settings.limits, share) is None


# ------------------------------------------------------------------ background work


async def test_a_principal_runs_only_its_share_of_the_background_work() -> None:
    gates = Gates()
    # Four in all, two per principal; the loop watcher (the server's own) holds one.
    server = tenants(gates, limits=Limits(max_background=4, max_background_per_principal=2))
    async with principals(server) as (alice, bob, carol):
        runtime = alice.app.runtime
        assert runtime is not None and runtime.background_count == 1
        with trio.fail_after(10):
            for tag in ("a1", "a2"):
                result = await alice.call_tool("kick", {"tag": tag})
                assert result["content"] == [{"type": "text", "text": "started"}]
            share = {**RETRY, "limit": "max_background_tasks_per_principal"}
            call = {"name": "kick", "arguments": {"tag": "a3"}}
            assert await refused(alice, "tools/call", call) == (-32603, 503, share)
            from_thread = {"name": "kick_sync", "arguments": {"tag": "a4"}}
            assert await refused(alice, "tools/call", from_thread) == (-32603, 503, share)
            await bob.call_tool("kick_sync", {"tag": "b1"})
            everything = {**RETRY, "limit": "max_background_tasks"}
            call = {"name": "kick", "arguments": {"tag": "c1"}}
            assert await refused(carol, "tools/call", call) == (-32603, 503, everything)
            await gates.until("a1", "a2", "b1")
            assert sorted(gates.entered) == ["a1", "a2", "b1"]
            gates.open("a1")
            await trio.testing.wait_all_tasks_blocked()
            assert runtime.background_count == 3
            await alice.call_tool("kick", {"tag": "a5"})  # a1's place, given back
            for tag in ("a2", "a5", "b1"):
                gates.open(tag)
            await trio.testing.wait_all_tasks_blocked()
            assert runtime.background_count == 1  # the loop watcher's


# ------------------------------------------------------------------ worker threads


async def test_past_its_share_of_threads_a_principal_waits_while_others_are_served() -> None:
    gates = Gates()
    server = tenants(gates, limits=Limits(max_threads=3, max_threads_per_principal=2))
    async with principals(server) as (alice, bob, _), trio.open_nursery() as nursery:
        runtime = alice.app.runtime
        assert runtime is not None
        answered: list[str] = []
        bob_answered = trio.Event()

        async def hold(client: Client, tag: str) -> None:
            result = await client.call_tool("hold", {"tag": tag})
            answered.append(result["content"][0]["text"])
            if tag == "b1":
                bob_answered.set()

        with trio.fail_after(10):
            for tag in ("a1", "a2", "a3"):
                nursery.start_soon(hold, alice, tag)
            await gates.until(count=2)
            first, second = gates.entered
            (waiting,) = {"a1", "a2", "a3"} - {first, second}  # for alice's share
            nursery.start_soon(hold, bob, "b1")
            await gates.until("b1")
            gates.open("b1")
            await bob_answered.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert answered == ["b1"]
            assert runtime.thread_limiter.borrowed_tokens == 2
            assert waiting not in gates.entered  # a thread is free, but not alice's to take
            gates.open(first)
            await gates.until(waiting)
            for tag in (second, waiting):
                gates.open(tag)
    assert sorted(answered) == ["a1", "a2", "a3", "b1"]
    assert (runtime.thread_limiter.borrowed_tokens, runtime.threads.principals) == (0, 0)


async def test_a_principal_that_abandons_hung_calls_pins_only_its_own_share() -> None:
    gates = Gates()
    server = tenants(gates, limits=Limits(max_threads=3, max_threads_per_principal=1))
    async with principals(server) as (alice, bob, _):
        runtime = alice.app.runtime
        assert runtime is not None
        with trio.fail_after(10):
            async with trio.open_nursery() as gone:  # alice calls, then disconnects
                gone.start_soon(alice.call_tool, "hold", {"tag": "a1"})
                await gates.until("a1")
                gone.cancel_scope.cancel()
            assert runtime.thread_limiter.borrowed_tokens == 1  # the thread runs on
            async with trio.open_nursery() as nursery:
                nursery.start_soon(alice.call_tool, "hold", {"tag": "a2"})
                nursery.start_soon(bob.call_tool, "hold", {"tag": "b1"})
                await gates.until("b1")
                assert "a2" not in gates.entered  # alice's one thread still hangs
                gates.open("b1")
                gates.open("a1")  # the hung call returns: alice's place comes back
                await gates.until("a2")
                gates.open("a2")
    assert runtime.threads.principals == 0
