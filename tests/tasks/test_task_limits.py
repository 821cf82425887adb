"""What bounds tasks: the store's capacity, its byte bound (running tasks hold their reserve),
the size of an input, and the tasks stored per principal."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from support.answers import poll_until_terminal
from support.task_service import TASKS, WITH_TASKS, tasks_of
from support.task_world import FakeClock, World, answer, build, create, settle, update

from presa_trio import Context, Server, Validation
from presa_trio.ext.tasks import EXTENSION_ID, TaskLimits, TasksExtension
from presa_trio.testing import Client, RpcError, open_client


async def test_a_large_input_runs_synchronously_or_is_refused(fixture_server: Server) -> None:
    label = "z" * 400_000
    async with open_client(fixture_server, capabilities=TASKS) as client:
        result = await client.call_tool("slow_compute", {"seconds": 0, "label": label})
        assert result["resultType"] == "complete"
        assert result["content"] == [{"type": "text", "text": f"Completed {label}"}]
        small = await client.call_tool("slow_compute", {"seconds": 0, "label": "small"})
        assert small["resultType"] == "task"
        with pytest.raises(RpcError) as caught:
            await client.call_tool("failing_job", {"blob": label})
        assert (caught.value.code, caught.value.status) == (-32602, 400)
        assert "262144" in caught.value.message
        runtime = client.app.runtime
        assert runtime is not None
        assert await runtime.service(EXTENSION_ID).store.count() == 1  # only "small"


def _principal(ctx: Context) -> str:
    return str((ctx.meta.client_info or {}).get("name", ""))


async def test_stored_tasks_are_bounded_per_principal() -> None:
    server = Server("quota", "1", validation=Validation(outbound=True), loop_warning=None)
    limits = TaskLimits(max_tasks=None, max_stored_per_principal=3, max_active_per_principal=None)
    server.add_extension(TasksExtension(limits=limits, principal=_principal))

    @server.tool(options={"tasks": "required"})
    async def instant() -> str:
        """Done at once."""
        await trio.lowlevel.checkpoint()
        return "done"

    async with open_client(
        server, capabilities=TASKS, client_info={"name": "A", "version": "1"}
    ) as alice:
        bob = Client(alice.app, capabilities=TASKS, client_info={"name": "B", "version": "1"})
        for _ in range(3):
            task, _seen = await poll_until_terminal(alice, await alice.create_task("instant"))
            assert task["status"] == "completed"
        with pytest.raises(RpcError) as caught:
            await alice.call_tool("instant", {})
        assert (caught.value.code, caught.value.status) == (-32603, 503)
        assert caught.value.data == {
            "retryable": True,
            "limit": "max_stored_tasks_per_principal",
        }
        task, _seen = await poll_until_terminal(bob, await bob.create_task("instant"))
        assert task["status"] == "completed"
        runtime = alice.app.runtime
        assert runtime is not None
        assert await runtime.service(EXTENSION_ID).store.count() == 4


async def test_capacity_limits(world: World, clock: FakeClock) -> None:
    server, _ext = build(
        world,
        clock,
        limits=TaskLimits(
            max_tasks=None, max_stored_per_principal=None, max_active_per_principal=2
        ),
    )
    async with open_client(server, capabilities=WITH_TASKS) as client:
        await create(client, "sleepy")
        await create(client, "sleepy")
        with pytest.raises(RpcError) as caught:
            await client.call_tool("sleepy", {})
        assert (caught.value.code, caught.value.status) == (-32603, 503)
        assert caught.value.data == {"retryable": True, "limit": "max_active_tasks_per_principal"}
        assert await tasks_of(client).store.count() == 2
        client.client_info = {"name": "other", "version": "1"}
        await create(client, "sleepy")


async def test_a_run_that_fills_the_byte_bound_refuses_the_next_creation(
    world: World, clock: FakeClock
) -> None:
    """``TaskLimits.max_stored_bytes``: the results held count, and so does what each running
    task may still add (its reserve, ``max_result_bytes``)."""
    limits = TaskLimits(
        max_tasks=None,
        max_stored_per_principal=None,
        max_active_per_principal=None,
        max_stored_bytes=4_000,
    )
    server, _ext = build(world, clock, limits=limits, max_result_bytes=1_000)
    full = {"retryable": True, "limit": "max_stored_bytes"}
    async with open_client(server, capabilities=WITH_TASKS) as client:
        store = tasks_of(client).store
        first = await create(client, "blob", {"size": 800})
        await settle(client, first)
        size = store.stored_bytes  # one result, as JSON
        assert 800 < size < 1_000
        fits = (4_000 - 1_000) // size + 1  # while the bytes held leave room for a reserve
        for _ in range(fits - 1):
            await settle(client, await create(client, "blob", {"size": 800}))
        assert store.stored_bytes == fits * size
        with pytest.raises(RpcError) as caught:
            await client.call_tool("blob", {"size": 1})
        assert (caught.value.code, caught.value.status, caught.value.data) == (-32603, 503, full)
        assert caught.value.message == "Task capacity exhausted"
        assert await store.count() == fits and tasks_of(client).runner.live_count == 0
        client.client_info = {"name": "other", "version": "1"}  # a bound for all principals
        with pytest.raises(RpcError) as caught:
            await client.call_tool("blob", {"size": 1})
        assert caught.value.data == full
        assert await store.delete_expired(10**15) == fits  # expired and reaped: room again
        assert store.stored_bytes == 0
        await create(client, "blob", {"size": 1})


async def test_running_tasks_hold_their_reserve_of_the_byte_bound(
    world: World, clock: FakeClock
) -> None:
    limits = TaskLimits(max_stored_per_principal=None, max_stored_bytes=4_000)
    server, _ext = build(world, clock, limits=limits, max_result_bytes=1_000)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        store = tasks_of(client).store
        parked = [await create(client, "ask", {"keys": ["k"]}) for _ in range(3)]
        await trio.testing.wait_all_tasks_blocked()
        assert 0 < store.stored_bytes < 1_000  # three questions, and three reserves of 1,000
        with pytest.raises(RpcError) as caught:
            await client.call_tool("blob", {"size": 1})
        assert caught.value.data == {"retryable": True, "limit": "max_stored_bytes"}
        await update(client, parked[0], {"k": answer("v")})
        assert (await settle(client, parked[0]))["status"] == "completed"  # its reserve is free
        await settle(client, await create(client, "blob", {"size": 1}))


async def test_input_size_limit(world: World, clock: FakeClock) -> None:
    server, _ext = build(world, clock, max_input_bytes=100)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        with pytest.raises(RpcError) as caught:  # a task it must be, and it cannot be one
            await client.call_tool("only_as_task", {"text": "k" * 200})
        assert (caught.value.code, caught.value.status) == (-32602, 400)
        # Declaring Tasks does not require a task: an optional tool runs synchronously.
        answered = await client.call_tool("ask", {"keys": ["k" * 200]})
        assert answered["resultType"] == "input_required"  # the plain MRTR path
        assert await tasks_of(client).store.count() == 0
        assert (await client.call_tool("only_as_task", {"text": "ok"}))["resultType"] == "task"
