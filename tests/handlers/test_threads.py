"""Sync handlers run in worker threads bounded by the run's limiter, never on the event loop.

Blocking happens in real threads; the tests prove what they claim by the order in which
things happen (who answered while whom still blocked), never by timing a call.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import trio

from presa_trio import Context, Limits, Server
from presa_trio.testing import Client, open_client

SLEEP = 0.3
TOOLS_CHANGED = "notifications/tools/list_changed"


def text_of(result: dict[str, Any]) -> str:
    assert result["resultType"] == "complete" and len(result["content"]) == 1
    text: str = result["content"][0]["text"]
    return text


async def wait_in_thread(event: threading.Event) -> None:
    """Wait for a ``threading.Event`` without blocking the event loop (at most 5 s)."""
    assert await trio.to_thread.run_sync(event.wait, 5.0), "the event was never set"


async def test_a_blocking_sync_tool_does_not_delay_other_calls() -> None:
    server = Server("threads")
    entered = threading.Event()
    threads: dict[str, bool] = {}

    @server.tool()
    def blocking() -> str:
        """Blocks its worker thread."""
        threads["blocking"] = threading.current_thread() is threading.main_thread()
        entered.set()
        time.sleep(SLEEP)
        return "slept"

    @server.tool(thread=False)
    def inline() -> str:
        """Cheap and pure: runs on the event loop."""
        threads["inline"] = threading.current_thread() is threading.main_thread()
        return "inline"

    @server.tool()
    async def asynchronous() -> str:
        """An async tool."""
        await trio.lowlevel.checkpoint()
        return "async"

    slow: dict[str, Any] = {}

    async def call_blocking(client: Client) -> None:
        slow["result"] = await client.call_tool("blocking")

    async with open_client(server) as client:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call_blocking, client)
                await wait_in_thread(entered)
                inline_result = await client.call_tool("inline")
                async_result = await client.call_tool("asynchronous")
                assert "result" not in slow  # both answered while the sync tool still slept
            assert text_of(inline_result) == "inline"
            assert text_of(async_result) == "async"
            assert text_of(slow["result"]) == "slept"
    assert threads == {"blocking": False, "inline": True}


@pytest.mark.parametrize("max_threads", [1, 2])
async def test_the_thread_limiter_bounds_concurrent_sync_calls(max_threads: int) -> None:
    server = Server("limited", limits=Limits(max_threads=max_threads))
    lock = threading.Lock()
    running = [0]
    peak = [0]

    @server.tool()
    def blocking() -> str:
        """Blocks its worker thread for a while."""
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(SLEEP / 2)
        with lock:
            running[0] -= 1
        return "slept"

    async with open_client(server) as client:
        runtime = client.app.runtime
        assert runtime is not None and runtime.thread_limiter.total_tokens == max_threads
        results: list[dict[str, Any]] = []

        async def call() -> None:
            results.append(await client.call_tool("blocking"))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                nursery.start_soon(call)
    assert [text_of(r) for r in results] == ["slept", "slept"]
    # One slot: one after the other; two: side by side. The bound is the limiter's doing.
    assert peak[0] == max_threads


async def test_disconnecting_abandons_a_blocked_sync_tool_which_still_finishes() -> None:
    server = Server(
        "abandon", limits=Limits(max_threads=1)
    )  # one slot: the abandoned thread holds it
    entered = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    @server.tool()
    def stuck() -> str:
        """Blocks until released, then says so."""
        entered.set()
        release.wait(10)
        finished.set()
        return "done"

    @server.tool(thread=False)
    def inline() -> str:
        """Returns at once, on the event loop."""
        return "inline"

    @server.tool()
    def threaded() -> str:
        """Returns at once, in a worker thread."""
        return "threaded"

    async with open_client(server) as client:
        runtime = client.app.runtime
        assert runtime is not None
        try:
            with trio.fail_after(10):
                async with client.stream("tools/call", {"name": "stuck"}) as stream:
                    await wait_in_thread(entered)
                    stream.disconnect()
                # Leaving the block waited for the request's handler, which let go of the
                # thread at once: the thread is still blocked below.
                assert stream.status == 0  # no response was started for the dropped request
                assert not finished.is_set()  # ... while its thread is still blocked
                assert runtime.thread_limiter.borrowed_tokens == 1  # and keeps its slot
                assert text_of(await client.call_tool("inline")) == "inline"  # serving on

                release.set()
                await wait_in_thread(finished)  # the abandoned thread ran to its end
                async with runtime.thread_limiter:  # and its slot came back when it returned
                    pass
                assert text_of(await client.call_tool("threaded")) == "threaded"
        finally:
            release.set()


async def test_a_sync_tool_can_announce_changes_from_its_worker_thread() -> None:
    server = Server("announce")
    seen: dict[str, Any] = {}

    @server.tool()
    def change(ctx: Context) -> str:
        """Announces a tool-list change from its worker thread."""
        seen["main thread"] = threading.current_thread() is threading.main_thread()
        seen["in trio run"] = trio.lowlevel.in_trio_run()
        return str(ctx.runtime.notify_tools_changed())

    async with open_client(server) as client:
        with trio.fail_after(10):
            async with client.listen({"toolsListChanged": True}) as stream:
                ack = await stream.next()
                subscription = ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
                assert text_of(await client.call_tool("change")) == "1"
                note = await stream.next()
                assert note == {
                    "jsonrpc": "2.0",
                    "method": TOOLS_CHANGED,
                    "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": subscription}},
                }
    assert seen == {"main thread": False, "in trio run": False}


@pytest.mark.parametrize("thread", [False, True], ids=["event-loop", "worker-thread"])
async def test_a_sync_tool_that_hands_back_a_coroutine_is_answered_with_its_result(
    thread: bool,
) -> None:
    """A sync callable returning a coroutine (a wrapper around an async function, say) is
    awaited on the event loop, whichever way the sync call itself ran; a plain value is not."""
    server = Server("threads")

    async def later(word: str) -> str:
        await trio.lowlevel.checkpoint()
        return f"awaited {word}"

    def wrapper(word: str) -> Any:
        return later(word)

    def plain(word: str) -> str:
        return f"plain {word}"

    server.tool("wrapped", description="Hands back a coroutine.", thread=thread)(wrapper)
    server.tool("plain", description="Returns text.", thread=thread)(plain)
    async with open_client(server) as client:
        wrapped = await client.call_tool("wrapped", {"word": "w"})
        assert text_of(wrapped) == "awaited w"
        assert "isError" not in wrapped
        assert text_of(await client.call_tool("plain", {"word": "p"})) == "plain p"


@pytest.mark.parametrize("thread", [False, True], ids=["event-loop", "worker-thread"])
async def test_a_sync_completer_that_hands_back_a_coroutine_is_answered_with_its_values(
    thread: bool,
) -> None:
    server = Server("threads")

    @server.prompt()
    def greet(name: str) -> str:
        """Greets."""
        return f"Hello {name}"

    async def suggestions(value: str) -> list[str]:
        await trio.lowlevel.checkpoint()
        return [f"{value}a", f"{value}b"]

    @server.completion(prompt="greet", thread=thread)
    def complete(argument: str, value: str, context: dict[str, str]) -> Any:
        return suggestions(value)

    async with open_client(server) as client:
        result = await client.request(
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "greet"},
                "argument": {"name": "name", "value": "x"},
            },
        )
    assert result["completion"] == {"values": ["xa", "xb"], "total": 2, "hasMore": False}
