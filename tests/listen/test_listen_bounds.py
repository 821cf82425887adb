"""The bounds a client can push on through ``subscriptions/listen``: the number of open streams
and the number of task ids one stream may follow."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from support.task_service import TASKS

from presa_trio import Limits, Server, Validation
from presa_trio.testing import RpcError, open_client


async def test_listen_streams_are_bounded() -> None:
    server = Server(
        "listen",
        "1",
        validation=Validation(outbound=True),
        limits=Limits(max_listeners=2),
        loop_warning=None,
    )

    @server.tool()
    def noop() -> str:
        """Nothing."""
        return "ok"

    async with open_client(server, capabilities={}) as client:
        runtime = client.app.runtime
        assert runtime is not None
        with trio.fail_after(10):
            async with client.listen({"toolsListChanged": True}) as first:
                await first.next()
                async with client.listen({"toolsListChanged": True}) as second:
                    await second.next()
                    assert runtime.bus.listener_count == 2
                    with pytest.raises(RpcError) as caught:
                        await client.request(
                            "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
                        )
                    assert (caught.value.code, caught.value.status) == (-32603, 503)
                    assert caught.value.data == {"retryable": True, "limit": "max_listen_streams"}
                    assert runtime.bus.listener_count == 2
                await trio.testing.wait_all_tasks_blocked()
                assert runtime.bus.listener_count == 1
                async with client.listen({"toolsListChanged": True}) as third:
                    ack = await third.next()
                    assert ack["method"] == "notifications/subscriptions/acknowledged"
                    assert runtime.bus.listener_count == 2
                    assert runtime.notify_tools_changed() == 2
                    assert (await third.next())["method"] == "notifications/tools/list_changed"
                    assert (await first.next())["method"] == "notifications/tools/list_changed"


async def test_listen_task_ids_are_bounded(fixture_server: Server) -> None:
    async with open_client(fixture_server, capabilities=TASKS) as client:
        with pytest.raises(RpcError) as caught:
            await client.request(
                "subscriptions/listen",
                {"notifications": {"taskIds": [f"t{i}" for i in range(101)]}},
            )
        assert (caught.value.code, caught.value.status) == (-32602, 400)
        with trio.fail_after(10):
            async with client.listen({"taskIds": [f"t{i}" for i in range(100)]}) as stream:
                ack = await stream.next()
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                assert ack["params"]["notifications"] == {}  # none of them is a known task
