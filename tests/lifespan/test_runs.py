"""A server is declarations; each run (``open_runtime``) owns its own bus, services and state.

Runs one after the other and runs at once must not share a listen bus; an app whose lifespan
is not running (or is draining) refuses new work as retryable -32603 (HTTP 503).
"""

from __future__ import annotations

import pytest
import trio

from presa_trio import Context, Server
from presa_trio.ext.tasks import EXTENSION_ID, MemoryTaskStore, TasksExtension
from presa_trio.testing import Client, RpcError, Stream, open_client

SUB = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
ACK = "notifications/subscriptions/acknowledged"
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
TASKS = {"extensions": {EXTENSION_ID: {}}}
BOTH_FLAGS = {"toolsListChanged": True, "promptsListChanged": True}


def changing_server() -> Server:
    """A server with a tool that announces a tool-list change through its own run."""
    server = Server("runs", "1")

    @server.tool()
    def change(ctx: Context) -> str:
        """Announces a tool-list change; returns how many listeners got it."""
        return str(ctx.runtime.notify_tools_changed())

    @server.prompt()
    def hello() -> str:
        """A prompt, so that prompt-list changes can be listened to."""
        return "hello"

    return server


async def acknowledged(stream: Stream) -> int | str:
    ack = await stream.next()
    assert ack["method"] == ACK
    subscription: int | str = ack["params"]["_meta"][SUB]
    return subscription


def text_of(result: dict[str, object]) -> str:
    content = result["content"]
    assert isinstance(content, list) and len(content) == 1
    text: str = content[0]["text"]
    return text


@pytest.mark.parametrize("same_app", [False, True], ids=["fresh-app", "same-app"])
async def test_a_second_run_still_delivers_list_changes(same_app: bool) -> None:
    server = changing_server()
    app = server.asgi_app()
    runtimes = []
    with trio.fail_after(10):
        for _ in range(2):
            async with (
                open_client(app if same_app else server) as client,
                client.listen({"toolsListChanged": True}) as stream,
            ):
                runtime = client.app.runtime
                assert runtime is not None
                runtimes.append(runtime)
                subscription = await acknowledged(stream)
                assert runtime.bus.listener_count == 1
                result = await client.call_tool("change")
                assert text_of(result) == "1"  # the tool's own run had exactly one listener
                note = await stream.next()
                assert note == {
                    "jsonrpc": "2.0",
                    "method": TOOLS_CHANGED,
                    "params": {"_meta": {SUB: subscription}},
                }
    first, second = runtimes
    assert first is not second and first.bus is not second.bus
    assert first.draining.is_set() and second.draining.is_set()  # each run drained on exit


async def test_two_runs_at_once_each_have_their_own_bus() -> None:
    server = changing_server()
    with trio.fail_after(10):
        async with open_client(server) as a:
            run_a = a.app.runtime
            assert run_a is not None
            async with open_client(server) as b:
                run_b = b.app.runtime
                assert run_b is not None
                assert run_a is not run_b and run_a.bus is not run_b.bus
                async with a.listen(BOTH_FLAGS) as on_a, b.listen(BOTH_FLAGS) as on_b:
                    await acknowledged(on_a)
                    await acknowledged(on_b)

                    # Through run A only: A's listener gets it, B's does not. B's next message
                    # is the prompts change sent after it: a channel is FIFO, so had B got the
                    # tools change it would come first.
                    assert run_a.notify_tools_changed() == 1
                    assert (await on_a.next())["method"] == TOOLS_CHANGED
                    assert run_b.notify_prompts_changed() == 1
                    assert (await on_b.next())["method"] == PROMPTS_CHANGED

                    # A tool called through run B announces through run B only.
                    assert text_of(await b.call_tool("change")) == "1"
                    assert (await on_b.next())["method"] == TOOLS_CHANGED
                    assert run_a.notify_prompts_changed() == 1
                    assert (await on_a.next())["method"] == PROMPTS_CHANGED

                    # The server announces through every run it has.
                    assert server.notify_tools_changed() == 2
                    assert (await on_a.next())["method"] == TOOLS_CHANGED
                    assert (await on_b.next())["method"] == TOOLS_CHANGED
            # Run B is over: the server forgets it, run A goes on.
            assert run_b.draining.is_set() and not run_a.draining.is_set()
            async with a.listen({"toolsListChanged": True}) as on_a:
                await acknowledged(on_a)
                assert server.notify_tools_changed() == 1
                assert (await on_a.next())["method"] == TOOLS_CHANGED
    assert server.notify_tools_changed() == 0


def tasks_server(store: MemoryTaskStore) -> Server:
    server = Server("runs", "1")
    server.add_extension(TasksExtension(store=store))

    @server.tool(options={"tasks": "optional"})
    async def work() -> str:
        """May become a task."""
        await trio.lowlevel.checkpoint()
        return "worked"

    @server.tool()
    def plain() -> str:
        """Always synchronous, in a worker thread."""
        return "plain"

    return server


NOT_RUNNING = {
    "code": -32603,
    "message": "Server is not running: its lifespan has not started",
    "data": {"retryable": True},
}


async def test_an_app_without_its_lifespan_answers_503_and_creates_no_task() -> None:
    store = MemoryTaskStore()  # outlives the runs, so what they stored can be counted
    app = tasks_server(store).asgi_app()
    client = Client(app, capabilities=TASKS)

    message = client.message("tools/call", {"name": "work", "arguments": {}})
    headers = dict(client.headers_for(message))
    assert headers["mcp-method"] == "tools/call" and headers["mcp-name"] == "work"
    before = await client.send(message)
    assert before.status == 503
    assert before.headers["content-type"] == "application/json"
    assert before.messages == [{"jsonrpc": "2.0", "id": message["id"], "error": NOT_RUNNING}]
    assert await store.count() == 0

    async with app.lifespan():  # the same request, with the app running, does create a task
        running = await client.send(client.message("tools/call", {"name": "work"}))
        assert running.status == 200
        assert running.response is not None
        assert running.response["result"]["resultType"] == "task"
        assert await store.count() == 1

    after = await client.send(client.message("tools/call", {"name": "work"}))
    assert after.status == 503
    assert after.response is not None and after.response["error"] == NOT_RUNNING
    assert await store.count() == 1


async def test_draining_refuses_new_tasks_but_serves_plain_calls() -> None:
    store = MemoryTaskStore()
    async with open_client(tasks_server(store), capabilities=TASKS) as client:
        with trio.fail_after(10):
            assert (await client.call_tool("work"))["resultType"] == "task"
            assert await store.count() == 1

            client.app.begin_draining()
            with pytest.raises(RpcError) as caught:
                await client.call_tool("work")
            refused = caught.value
            assert (refused.code, refused.status, refused.data) == (
                -32603,
                503,
                {"retryable": True},
            )
            assert refused.message == "Server is shutting down; no new tasks are accepted"
            assert await store.count() == 1  # nothing was stored for the refused task

            plain = await client.call_tool("plain")
            assert plain == {
                "resultType": "complete",
                "content": [{"type": "text", "text": "plain"}],
                "structuredContent": {"result": "plain"},
                "_meta": {SERVER_INFO: {"name": "runs", "version": "1"}},
            }
            # Without the tasks declaration the same tool runs synchronously, as it may.
            sync = await client.call_tool("work", capabilities={})
            assert sync["resultType"] == "complete" and text_of(sync) == "worked"
