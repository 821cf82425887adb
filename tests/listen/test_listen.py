"""subscriptions/listen in process: acknowledgement first, filters honoured, state released."""

from __future__ import annotations

import trio

from presa_trio import Server
from presa_trio.testing import Client, open_client

SUB = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


async def test_ack_first_with_the_agreed_subset(client: Client) -> None:
    async with client.listen(
        {
            "toolsListChanged": True,
            "resourceSubscriptions": ["test://static-text"],
            "promptsListChanged": False,
        }
    ) as stream:
        ack = await stream.next()
        assert stream.headers["content-type"] == "text/event-stream"
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {
            "toolsListChanged": True,
            "resourceSubscriptions": ["test://static-text"],
        }
        assert ack["params"]["_meta"][SUB] == client._next_id


async def test_subscription_ids_keep_their_type(client: Client) -> None:
    async with (
        client.listen({"toolsListChanged": True}, request_id="7") as text_id,
        client.listen({"toolsListChanged": True}, request_id=7) as int_id,
    ):
        assert (await text_id.next())["params"]["_meta"][SUB] == "7"
        assert (await int_id.next())["params"]["_meta"][SUB] == 7
        await client.call_tool("test_trigger_tool_change", {})
        assert (await text_id.next())["params"]["_meta"][SUB] == "7"
        assert (await int_id.next())["params"]["_meta"][SUB] == 7


async def test_changes_reach_every_matching_listener_only(client: Client) -> None:
    runtime = client.app.runtime
    assert runtime is not None
    async with (
        client.listen({"toolsListChanged": True}) as tools_a,
        client.listen({"toolsListChanged": True}) as tools_b,
        client.listen({"promptsListChanged": True}) as prompts,
    ):
        for stream in (tools_a, tools_b, prompts):
            await stream.next()
        assert runtime.bus.listener_count == 3
        await client.call_tool("test_trigger_tool_change", {})
        await client.call_tool("test_trigger_prompt_change", {})
        got_a, got_b, got_p = await tools_a.next(), await tools_b.next(), await prompts.next()
        assert got_a["method"] == got_b["method"] == "notifications/tools/list_changed"
        assert got_a["params"]["_meta"][SUB] != got_b["params"]["_meta"][SUB]
        assert got_p["method"] == "notifications/prompts/list_changed"
    await trio.testing.wait_all_tasks_blocked()
    assert runtime.bus.listener_count == 0


async def test_resource_updates_go_to_their_subscribers(client: Client) -> None:
    runtime = client.app.runtime
    assert runtime is not None
    async with (
        client.listen({"resourceSubscriptions": ["test://static-text"]}) as text,
        client.listen({"resourceSubscriptions": ["test://static-binary"]}) as binary,
    ):
        await text.next()
        await binary.next()
        assert runtime.notify_resource_updated("test://static-text") == 1
        assert runtime.notify_resource_updated("test://static-binary") == 1
        assert (await text.next())["params"]["uri"] == "test://static-text"
        assert (await binary.next())["params"]["uri"] == "test://static-binary"


async def test_unsupported_filter_parts_are_not_acknowledged() -> None:
    server = Server("tools-only")

    @server.tool()
    def t() -> str:
        """A tool."""
        return "t"

    async with (
        open_client(server) as client,
        client.listen(
            {
                "promptsListChanged": True,
                "toolsListChanged": True,
                "resourceSubscriptions": ["x://y"],
            }
        ) as stream,
    ):
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"toolsListChanged": True}


async def test_draining_ends_streams_gracefully(fixture_server: Server) -> None:
    async with (
        open_client(fixture_server) as client,
        client.listen({"toolsListChanged": True}) as stream,
    ):
        await stream.next()
        client.app.begin_draining()
        final = await stream.next()
        assert final["result"] == {
            "resultType": "complete",
            "_meta": {SUB: final["id"], SERVER_INFO: fixture_server.settings.server_info},
        }


async def test_a_stuck_listener_is_cut_off_and_told_so(fixture_server: Server) -> None:
    async with (
        open_client(fixture_server) as client,
        client.listen({"resourceSubscriptions": ["test://static-text"]}) as stream,
    ):
        await stream.next()
        runtime = client.app.runtime
        assert runtime is not None
        await trio.testing.wait_all_tasks_blocked()  # the stream waits for its next event
        for i in range(400):  # distinct news: each takes a slot; the bus buffers 256
            fixture_server.notify_resource_updated(f"test://static-text/{i}")
        assert runtime.bus.listener_count == 0
        received = 0
        while "id" not in (message := await stream.next()):
            received += 1
        assert received == 1 + 256  # one handed straight to the waiting stream, 256 buffered
        # The end says events were lost: an error, never the clean "complete" result.
        assert message["error"] == {
            "code": -32603,
            "message": "Listen stream fell behind; notifications were lost",
            "data": {"retryable": True},
        }


async def test_a_burst_reaches_a_reading_listener_whole(fixture_server: Server) -> None:
    async with (
        open_client(fixture_server) as client,
        client.listen({"toolsListChanged": True}) as stream,
    ):
        await stream.next()
        for _ in range(100):  # a burst of the same news coalesces: nothing is dropped
            assert fixture_server.notify_tools_changed() == 1
        note = await stream.next()
        assert note["method"] == "notifications/tools/list_changed"
        assert fixture_server.notify_tools_changed() == 1  # still listening, news again
        assert (await stream.next())["method"] == "notifications/tools/list_changed"
        client.app.begin_draining()
        assert (await stream.next())["result"]["resultType"] == "complete"  # a clean end


async def test_listen_is_not_found_without_anything_to_notify() -> None:
    from presa_trio.testing import RpcError

    async with open_client(Server("empty")) as client:
        try:
            await client.request(
                "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
            )
        except RpcError as error:
            assert (error.code, error.status) == (-32601, 404)
        else:
            raise AssertionError("listen on a server with nothing to notify must be -32601")


async def test_async_for_reads_a_stream_to_its_end(client: Client) -> None:
    meta = {"progressToken": "p"}
    with trio.fail_after(5):
        async with client.stream(
            "tools/call", {"name": "test_tool_with_progress"}, meta=meta
        ) as stream:
            messages = [message async for message in stream]
        async with client.stream("tools/call", {"name": "test_simple_text"}) as plain:
            answers = [message async for message in plain]
    assert stream.headers["content-type"] == "text/event-stream"
    assert [m["params"]["progress"] for m in messages[:-1]] == [0, 50, 100]
    assert messages[-1]["result"]["content"][0]["type"] == "text"
    assert plain.headers["content-type"] == "application/json"
    assert [a["result"]["content"][0]["text"] for a in answers] == [
        "This is a simple text response for testing."
    ]
