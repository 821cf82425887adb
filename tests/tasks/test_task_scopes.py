"""Which tasks a request can reach: unknown and malformed ids, another principal's tasks (unknown
to it), and the server's principal by default."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing
from support.ignored_answers import LOGGER, ignored_keys
from support.task_service import WITH_TASKS, tasks_of
from support.task_world import FakeClock, World, _principal, answer, create, ended, get, update

from presa_trio import Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import Client, RpcError, open_client


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_unknown_ids(env: tuple[Client, TasksExtension], method: str) -> None:
    client, _ = env
    params: dict[str, Any] = {"taskId": "no-such-task"}
    if method == "tasks/update":
        params["inputResponses"] = {}
    with pytest.raises(RpcError) as caught:
        await client.request(method, params)
    assert (caught.value.code, caught.value.status) == (-32602, 400)


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, -32602),
        ({"taskId": ""}, -32602),
        ({"taskId": 5}, -32602),
        ({"taskId": "x" * 257}, -32602),
    ],
)
async def test_bad_task_ids(
    env: tuple[Client, TasksExtension], params: dict[str, Any], code: int
) -> None:
    client, _ = env
    client.validate = False
    message = client.message("tasks/get", params)
    headers = client.headers_for(message)
    if not any(name == "mcp-name" for name, _ in headers):
        headers.append(("mcp-name", "x"))
    result = await client.send(message, headers)
    assert result.response is not None and result.response["error"]["code"] == code


async def test_an_update_for_another_principals_task_is_the_unknown_task_error(
    env: tuple[Client, TasksExtension], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = env
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    client.client_info = {"name": "alice", "version": "1"}
    parked = await create(client, "ask", {"keys": ["a"]})
    finished = await ended(client, "completed")
    await trio.testing.wait_all_tasks_blocked()
    before = await get(client, parked)
    client.client_info = {"name": "mallory", "version": "1"}
    refusals = []
    for task_id in (parked, finished, "no-such-task"):
        with pytest.raises(RpcError) as caught:
            await update(client, task_id, {"a": answer("stolen")})
        refusals.append((caught.value.status, caught.value.code, caught.value.message))
        assert caught.value.data is None
    assert refusals == [(400, -32602, "Unknown or inaccessible taskId")] * 3
    assert ignored_keys(caplog) == []
    client.client_info = {"name": "alice", "version": "1"}
    assert await get(client, parked) == before
    assert tasks_of(client).runner.parked_count() == 1


async def test_scopes_are_isolated(env: tuple[Client, TasksExtension]) -> None:
    client, _ = env
    task_id = await create(client, "sleepy")
    client.client_info = {"name": "mallory", "version": "1"}
    for method, params in (
        ("tasks/get", {}),
        ("tasks/cancel", {}),
        ("tasks/update", {"inputResponses": {}}),
    ):
        with pytest.raises(RpcError) as caught:
            await client.request(method, {"taskId": task_id, **params})
        assert (caught.value.code, caught.value.message) == (
            -32602,
            "Unknown or inaccessible taskId",
        )
    client.client_info = {"name": "presa-trio-testing", "version": "1"}
    assert (await get(client, task_id))["status"] == "working"


async def test_scope_defaults_to_the_servers_principal(world: World, clock: FakeClock) -> None:
    server = Server("p", principal=_principal)
    ext = TasksExtension(clock=clock)
    server.add_extension(ext)

    @server.tool(options={"tasks": "optional"})
    async def wait() -> str:
        """Waits."""
        await trio.sleep(3600)
        return "never"

    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "wait")
        client.client_info = {"name": "eve", "version": "1"}
        with pytest.raises(RpcError):
            await get(client, task_id)
        client.client_info = {"name": "presa-trio-testing", "version": "1"}
        assert (await get(client, task_id))["status"] == "working"
        await client.request("tasks/cancel", {"taskId": task_id})
