"""``tasks/cancel``: the cleanup runs before the acknowledgement, a parked task releases its
channel, a terminal task is acknowledged and unchanged, shutdown stops running tasks, and a tool
that ignores its cancellation cannot delay the acknowledgement past its bound."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from support.task_service import WITH_TASKS, tasks_of
from support.task_world import FakeClock, World, build, create, get, settle

from presa_trio import Server, Validation
from presa_trio.ext.tasks import MemoryTaskStore, TasksExtension
from presa_trio.testing import Client, open_client


@pytest.mark.parametrize("variant", ["shielded", "swallowing"])
async def test_a_tool_that_ignores_cancellation(
    variant: str, mock_clock: trio.testing.MockClock
) -> None:
    """The cancel is acknowledged within its 5 s bound, the task reads ``cancelled``, and the
    result the tool returns afterwards never appears."""
    mock_clock.autojump_threshold = 0
    server = Server("stubborn", "1", validation=Validation(outbound=True))
    server.add_extension(TasksExtension())
    returned: list[float] = []

    @server.tool(options={"tasks": "required"})
    async def shielded() -> str:
        """Catches its cancellation and keeps working, shielded, past the cancel's bound."""
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await trio.sleep(30)  # far longer than the cancel's 5 s wait
        returned.append(trio.current_time())
        return "late result"

    @server.tool(options={"tasks": "required"})
    async def swallowing() -> str:
        """Swallows its cancellation and returns a result at once."""
        swallowed = False
        try:
            await trio.sleep_forever()
        except BaseException:
            swallowed = True
        returned.append(trio.current_time())
        return f"late result (swallowed={swallowed})"

    async with open_client(server, capabilities=WITH_TASKS) as client:
        runner = tasks_of(client).runner
        task_id = await client.create_task(variant)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        assert (await client.cancel_task(task_id))["resultType"] == "complete"
        waited = trio.current_time() - start
        if variant == "shielded":
            assert waited == pytest.approx(5.0)  # the bound, not the tool's 30 s
            assert returned == [] and runner.live_count == 1
        else:
            assert waited == 0 and len(returned) == 1
        task = await client.get_task(task_id)
        assert task["status"] == "cancelled" and "result" not in task
        await trio.sleep(60)  # the stubborn tool has long returned its late result
        assert len(returned) == 1 and runner.live_count == 0
        later = await client.get_task(task_id)
        assert later == task and "result" not in later and "error" not in later


SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "tasks", "version": "1"}}


async def test_cancel_runs_cleanup_before_the_ack(
    env: tuple[Client, TasksExtension], world: World, mock_clock: trio.testing.MockClock
) -> None:
    client, _ext = env
    task_id = await create(client, "sleepy")
    await world.entered.wait()
    start = trio.current_time()
    ack = await client.request("tasks/cancel", {"taskId": task_id})
    assert ack == {"resultType": "complete", "_meta": SERVER_INFO}
    assert world.log == ["finally"]  # the tool's cleanup ran before the ack was sent
    assert trio.current_time() == start  # and no clock time passed
    task = await get(client, task_id)
    assert (task["status"], task["statusMessage"]) == ("cancelled", "Cancellation requested")
    assert tasks_of(client).runner.live_count == 0


async def test_cancelling_a_parked_task_releases_its_channel(
    env: tuple[Client, TasksExtension], mock_clock: trio.testing.MockClock
) -> None:
    client, _ext = env
    task_id = await create(client, "ask", {"keys": ["a"]})
    await trio.testing.wait_all_tasks_blocked()
    assert (await get(client, task_id))["status"] == "input_required"
    assert tasks_of(client).runner.parked_count() == 1
    start = trio.current_time()
    await client.request("tasks/cancel", {"taskId": task_id})
    assert trio.current_time() == start  # released at the ack, no clock time needed
    assert tasks_of(client).runner.parked_count() == 0 and tasks_of(client).runner.live_count == 0
    assert (await get(client, task_id))["status"] == "cancelled"
    assert (
        len(tasks_of(client).runner.nursery.child_tasks) == 0
    )  # every task ended: the runner holds none


async def test_terminal_cancel_is_acked_and_changes_nothing(
    env: tuple[Client, TasksExtension],
) -> None:
    client, _ = env
    task_id = await create(client, "sleepy", {"seconds": 0})
    done = await settle(client, task_id)
    assert await client.request("tasks/cancel", {"taskId": task_id}) == {
        "resultType": "complete",
        "_meta": SERVER_INFO,
    }
    assert await get(client, task_id) == done


async def test_shutdown_stops_running_tasks(world: World, clock: FakeClock) -> None:
    store = MemoryTaskStore()  # outlives the run, so the record can be read afterwards
    server, _ = build(world, clock, store=store)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await create(client, "sleepy")
        await world.entered.wait()
    assert world.log == ["finally"]
    record = await store.get(task_id)
    assert record is not None and record.status == "failed"  # stopped, not a client's cancel
    assert record.error == {
        "code": -32603,
        "message": "The server stopped before the task finished",
    }
