"""A task's ttl: never early, an expired task is unknown and then reaped, and a running task
that expires is announced even with a fast reaper."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from support.task_service import WITH_TASKS, tasks_of
from support.task_world import FakeClock, World, build, create, get, settle

from presa_trio.testing import RpcError, open_client


async def test_ttl_is_never_early_and_expired_tasks_are_unknown_then_reaped(
    world: World, clock: FakeClock
) -> None:
    server, ext = build(world, clock, ttl_ms=10_000)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "sleepy", {"seconds": 0})
        await settle(client, task_id)
        clock.now += 9.999
        assert (await get(client, task_id))["status"] == "completed"
        clock.now += 0.001
        with pytest.raises(RpcError) as caught:
            await get(client, task_id)
        assert caught.value.code == -32602
        assert await tasks_of(client).store.count() == 1
        assert await tasks_of(client).store.delete_expired(ext.now_ms()) == 1
        assert await tasks_of(client).store.count() == 0


async def test_the_reaper_deletes_expired_tasks(
    world: World, clock: FakeClock, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0
    server, _ext = build(world, clock, ttl_ms=10_000, reap_interval=60)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "sleepy", {"seconds": 0})
        await settle(client, task_id)
        await trio.sleep(61)  # a reaper pass: nothing has expired yet
        assert await tasks_of(client).store.count() == 1
        clock.now += 10  # createdAt + ttlMs has passed: unknown to requests at once...
        with pytest.raises(RpcError):
            await get(client, task_id)
        await trio.sleep(60)  # ...but kept through the reaper's grace, for a runner to finish
        assert await tasks_of(client).store.count() == 1
        clock.now += 10  # past the grace: the next pass deletes it
        await trio.sleep(60)
        assert await tasks_of(client).store.count() == 0


async def test_a_running_task_that_expires_is_announced_even_with_a_fast_reaper(
    world: World, clock: FakeClock, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0
    server, _ext = build(world, clock, ttl_ms=2_000, reap_interval=0.001)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "sleepy")
        async with client.listen({"taskIds": [task_id]}) as stream:
            await stream.next()  # the acknowledgement
            for _ in range(3):  # trio's deadline and the wall clock move together
                clock.now += 1
                await trio.sleep(1)
            with trio.fail_after(30):  # the mock clock jumps: a missing notice fails, fast
                note = await stream.next()
        assert note["method"] == "notifications/tasks"
        assert note["params"]["status"] == "failed"
        assert note["params"]["error"] == {
            "code": -32603,
            "message": "Task expired before it finished",
        }
