"""Tasks are negotiated per request: what a client must declare to use them, and the
extension's settings, read from each request alone."""

from __future__ import annotations

import pytest
from support.task_world import create

from presa_trio.ext.tasks import EXTENSION_ID, TasksExtension
from presa_trio.testing import Client, RpcError

MISSING = {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}


async def test_undeclared_requests(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    task_id = await create(client, "sleepy", {"seconds": 0})
    for method in ("tasks/get", "tasks/cancel"):
        with pytest.raises(RpcError) as caught:
            await client.request(method, {"taskId": task_id}, capabilities={})
        assert (caught.value.code, caught.value.data, caught.value.status) == (-32021, MISSING, 400)
    with pytest.raises(RpcError) as caught:
        await client.call_tool("broken", {}, capabilities={})
    assert (caught.value.code, caught.value.data) == (-32021, MISSING)
    sync = await client.call_tool("sleepy", {"seconds": 0}, capabilities={})
    assert sync["resultType"] == "complete" and "taskId" not in sync


async def test_the_declaration_is_per_request(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    assert (await client.call_tool("sleepy", {"seconds": 0}))["resultType"] == "task"
    assert (await client.call_tool("sleepy", {"seconds": 0}, capabilities={}))[
        "resultType"
    ] == "complete"
    assert (await client.call_tool("sleepy", {"seconds": 0}))["resultType"] == "task"


async def test_task_ids_filter_needs_the_declaration(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    with pytest.raises(RpcError) as caught:
        await client.request(
            "subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, capabilities={}
        )
    assert (caught.value.code, caught.value.data, caught.value.status) == (-32021, MISSING, 400)
    with pytest.raises(RpcError) as caught:
        await client.request("subscriptions/listen", {"notifications": {"taskIds": [""]}})
    assert caught.value.code == -32602


async def test_extension_settings_are_negotiated_per_request(
    env: tuple[Client, TasksExtension],
) -> None:
    client, _ = env
    client.validate = False  # the capability value is deliberately not an object
    caps = {"extensions": {EXTENSION_ID: "yes please"}}
    with pytest.raises(RpcError) as caught:
        await client.request("tools/list", capabilities=caps)
    assert (caught.value.code, caught.value.status) == (-32602, 400)
    future = {"extensions": {EXTENSION_ID: {"someFutureSetting": True}}}
    assert (await client.call_tool("sleepy", {"seconds": 0}, capabilities=future))[
        "resultType"
    ] == "task"
