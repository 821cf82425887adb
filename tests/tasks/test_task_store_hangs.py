"""A task store that never answers: a creation, update or cancel is a retryable 503 within its
bound and leaves nothing half-done; what the store completes late is recorded once it answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from support.task_service import WITH_TASKS, tasks_of
from support.task_world import FakeClock, World, answer, build, create, get, settle, update

from presa_trio.ext.tasks import MemoryTaskStore, Status, TaskLimits, TaskRecord
from presa_trio.ext.tasks._runner import COMMIT_SECONDS, RESETTLE_SECONDS
from presa_trio.testing import Client, RpcError, open_client

SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "tasks", "version": "1"}}
ACK = {"resultType": "complete", "_meta": SERVER_INFO}  # a tasks/update or tasks/cancel ack


class HangingStore:
    """A memory store whose calls named in ``hang`` do not return for an hour (a store that
    hangs: longer than any bound, and short enough that a runner without its bounds fails
    these tests instead of hanging them, shielded as its store calls are).

    With ``after_effect``, a hung ``create`` hangs after it stored the record, and the hang
    can be cancelled: a store that breaks the all-or-nothing contract. With ``late``, it
    stores and then takes 10 s, uncancellably: a store that keeps the contract, slowly.
    """

    def __init__(self) -> None:
        self.inner = MemoryTaskStore()
        self.hang: set[str] = set()
        self.after_effect = False
        self.late = False

    async def _wait(self, call: str) -> None:
        if call in self.hang:
            await trio.sleep(3_600)
        await trio.lowlevel.checkpoint()

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        if self.late:
            with trio.CancelScope(shield=True):
                await self.inner.create(task, limits)
                await trio.sleep(2 * COMMIT_SECONDS)
            return
        if not self.after_effect:
            await self._wait("create")
        await self.inner.create(task, limits)
        if self.after_effect:
            await self._wait("create")

    async def get(self, task_id: str) -> TaskRecord | None:
        await self._wait("get")
        return await self.inner.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        await self._wait("compare_and_set")
        return await self.inner.compare_and_set(task, expected_revision)

    async def delete_expired(self, now_ms: int) -> int:
        return await self.inner.delete_expired(now_ms)

    async def count(self) -> int:
        return await self.inner.count()


STORE_TIMED_OUT = (-32603, 503, {"retryable": True})


#: The longest until the runner offers a held-back outcome again once the store answers (an
#: offer already waiting on the hung store runs out its bound first).
OFFERED_AGAIN = RESETTLE_SECONDS + COMMIT_SECONDS


def refusal(caught: pytest.ExceptionInfo[RpcError]) -> tuple[int, int, Any]:
    return (caught.value.code, caught.value.status, caught.value.data)


@pytest.fixture
def hanging() -> HangingStore:
    return HangingStore()


@pytest.fixture
async def on_hanging(
    world: World, clock: FakeClock, hanging: HangingStore
) -> AsyncIterator[Client]:
    server, _ = build(world, clock, store=hanging)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        yield client


async def test_a_creation_the_store_never_answers_is_retryable_and_leaves_nothing(
    on_hanging: Client,
    hanging: HangingStore,
    world: World,
    autojump_clock: trio.testing.MockClock,
) -> None:
    client, runner = on_hanging, tasks_of(on_hanging).runner
    hanging.hang.add("create")
    start = trio.current_time()
    with pytest.raises(RpcError) as caught:
        await client.call_tool("sleepy", {"seconds": 0})
    assert refusal(caught) == STORE_TIMED_OUT
    assert trio.current_time() - start == COMMIT_SECONDS  # the bound, not forever
    assert (runner.live_count, await hanging.count()) == (0, 0)
    assert not world.entered.is_set()  # no work started
    hanging.hang.clear()
    await trio.sleep(OFFERED_AGAIN)  # the runner makes sure no record was left working
    assert (runner.unsettled_count, await hanging.count()) == (0, 0)
    assert (await settle(client, await create(client, "sleepy", {"seconds": 0})))[
        "status"
    ] == "completed"


async def test_a_creation_stored_before_the_store_hung_fails_that_record(
    on_hanging: Client,
    hanging: HangingStore,
    world: World,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The bound fired after a store that breaks the contract stored the record: the client
    is told to retry, no work runs for it, and the record is failed, not left working."""
    client, runner = on_hanging, tasks_of(on_hanging).runner
    hanging.hang.add("create")
    hanging.after_effect = True
    with pytest.raises(RpcError) as caught:
        await client.call_tool("sleepy", {"seconds": 0})
    assert refusal(caught) == STORE_TIMED_OUT
    (orphan,) = hanging.inner._tasks.values()  # stored, and no work behind it
    assert runner.live_count == 0 and not world.entered.is_set()
    hanging.hang.clear()
    await trio.sleep(OFFERED_AGAIN)  # by then the runner has failed the record
    failed = await hanging.get(orphan.task_id)
    assert failed is not None and failed.status is Status.FAILED
    assert failed.error == {"code": -32603, "message": "The server could not start this task"}
    assert runner.unsettled_count == 0


async def test_a_creation_the_store_completes_late_runs_its_task(
    on_hanging: Client,
    hanging: HangingStore,
    world: World,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A store that keeps the contract finishes a write it made: past the bound, the
    record and its work both exist, and the client gets its task."""
    client, runner = on_hanging, tasks_of(on_hanging).runner
    hanging.late = True
    task_id = await create(client, "sleepy", {"seconds": 0})
    assert (await settle(client, task_id))["status"] == "completed"
    assert world.entered.is_set() and runner.live_count == 0
    assert await hanging.count() == 1


async def test_an_update_the_store_never_answers_is_retryable_and_accepts_nothing(
    on_hanging: Client, hanging: HangingStore, autojump_clock: trio.testing.MockClock
) -> None:
    client, runner = on_hanging, tasks_of(on_hanging).runner
    task_id = await create(client, "ask", {"keys": ["a"]})
    await trio.testing.wait_all_tasks_blocked()
    hanging.hang.add("compare_and_set")
    with pytest.raises(RpcError) as caught:
        await update(client, task_id, {"a": answer("1")})
    assert refusal(caught) == STORE_TIMED_OUT
    assert (runner.live_count, runner.parked_count()) == (1, 1)  # still waiting for "a"
    hanging.hang.clear()
    assert list((await get(client, task_id))["inputRequests"]) == ["a"]
    assert await update(client, task_id, {"a": answer("1")}) == ACK  # the retry delivers
    assert (await settle(client, task_id))["result"]["content"][0]["text"] == "1"
    assert (runner.live_count, await hanging.count()) == (0, 1)


async def test_a_cancel_the_store_never_records_is_retryable_and_recorded_later(
    on_hanging: Client,
    hanging: HangingStore,
    world: World,
    autojump_clock: trio.testing.MockClock,
) -> None:
    client, runner = on_hanging, tasks_of(on_hanging).runner
    task_id = await create(client, "sleepy")
    await world.entered.wait()
    hanging.hang.add("compare_and_set")
    with pytest.raises(RpcError) as caught:
        await client.request("tasks/cancel", {"taskId": task_id})
    assert refusal(caught) == STORE_TIMED_OUT
    assert world.log == ["finally"]  # the task was cancelled; its record is not yet
    assert (runner.live_count, runner.unsettled_count) == (0, 1)
    hanging.hang.clear()
    await trio.sleep(OFFERED_AGAIN)
    assert (await get(client, task_id))["status"] == "cancelled"
    assert runner.unsettled_count == 0
