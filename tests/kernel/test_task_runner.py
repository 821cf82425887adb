"""The task runner on its own: nurseries, cancel scopes, parked channels, the mock clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio.ext.tasks import MemoryTaskStore, Status, TaskHandle, TaskRecord, TaskRunner
from presa_trio.ext.tasks._store import Limits


def record(task_id: str, ttl_ms: int | None = None) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        scope="",
        tool="t",
        status=Status.WORKING,
        created_ms=0,
        updated_ms=0,
        ttl_ms=ttl_ms,
        poll_interval_ms=None,
    )


@pytest.fixture
async def runner() -> AsyncIterator[TaskRunner]:
    store = MemoryTaskStore()
    runner = TaskRunner(store, lambda: int(trio.current_time() * 1000))
    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        yield runner
        nursery.cancel_scope.cancel()


async def stored(runner: TaskRunner, task_id: str, ttl_ms: int | None = None) -> TaskRecord:
    task = record(task_id, ttl_ms)
    await runner.store.create(task, Limits())
    return task


async def test_a_cancel_before_the_first_run_means_the_work_never_starts(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    ran = []

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        ran.append(handle.task_id)
        return {"resultType": "complete", "content": []}

    runner.start(await stored(runner, "early"), work)
    await runner.cancel("early")  # before the runner task was ever scheduled
    assert ran == []
    task = await runner.store.get("early")
    assert task is not None and task.status is Status.CANCELLED
    assert runner.live_count == 0 and len(runner.nursery.child_tasks) == 0


async def test_cancel_waits_for_cleanup_without_clock_time(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    log = []

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        try:
            await trio.sleep_forever()
        finally:
            log.append("finally")
        raise AssertionError("unreachable")

    runner.start(await stored(runner, "t"), work)
    await trio.testing.wait_all_tasks_blocked()
    start = trio.current_time()
    await runner.cancel("t")
    assert log == ["finally"] and trio.current_time() == start
    assert len(runner.nursery.child_tasks) == 0


async def test_parked_input_is_a_channel_per_key(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        answers = await handle.provide(
            None, {"a": {"method": "roots/list"}, "b": {"method": "roots/list"}}
        )
        return {"resultType": "complete", "content": [], "answers": answers}

    runner.start(await stored(runner, "p"), work)
    await trio.testing.wait_all_tasks_blocked()
    assert runner.parked_count() == 2
    await runner.deliver("p", {"b": {"roots": []}, "zzz": {}})
    await trio.testing.wait_all_tasks_blocked()
    parked = await runner.store.get("p")
    assert parked is not None and list(parked.input_requests) == ["a"]
    await runner.deliver("p", {"a": {"roots": [{"uri": "file:///x"}]}})
    await trio.testing.wait_all_tasks_blocked()
    done = await runner.store.get("p")
    assert done is not None and done.status is Status.COMPLETED
    assert done.result is not None and set(done.result["answers"]) == {"a", "b"}
    assert runner.parked_count() == 0 and len(runner.nursery.child_tasks) == 0


async def test_the_ttl_bounds_the_work(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0
    log = []

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        try:
            await trio.sleep(3600)
        finally:
            log.append(trio.current_time())
        raise AssertionError("unreachable")

    runner.start(await stored(runner, "ttl", ttl_ms=5_000), work)
    await trio.sleep(10)  # the mock clock jumps; the 5 s TTL deadline fires on the way
    assert runner.live_count == 0
    assert log == [pytest.approx(5.0)]
    task = await runner.store.get("ttl")
    assert task is not None and task.status is Status.CANCELLED
