"""A task store that fails or stalls: the failure fails only the request it serves (answered
without its detail) and a stalled store is bounded by the client's disconnect; the server keeps
serving everyone else."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing
from support.task_service import WITH_TASKS, tasks_of

from presa_trio import Server, Validation
from presa_trio.ext.tasks import MemoryTaskStore, TaskLimits, TaskRecord, TasksExtension
from presa_trio.testing import Client, open_client

INTERNAL = {"code": -32603, "message": "Internal error"}
SECRET_PATH = "/var/lib/presa/tasks.db"


class WallClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class FaultyStore:
    """A ``MemoryTaskStore`` whose operations named in ``failing`` raise an ``OSError`` naming
    a file, and whose ``get`` stalls while ``stalled`` (until cancelled)."""

    def __init__(self) -> None:
        self.inner = MemoryTaskStore()
        self.failing: set[str] = set()
        self.stalled = False
        self.stall_entered = trio.Event()
        self.stalls_abandoned = 0

    async def _enter(self, operation: str) -> None:
        await trio.lowlevel.checkpoint()
        if operation in self.failing:
            raise OSError(5, "Input/output error", SECRET_PATH)

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        await self._enter("create")
        await self.inner.create(task, limits)

    async def get(self, task_id: str) -> TaskRecord | None:
        await self._enter("get")
        if self.stalled:
            self.stall_entered.set()
            try:
                await trio.sleep_forever()
            finally:
                self.stalls_abandoned += 1
        return await self.inner.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        await self._enter("compare_and_set")
        return await self.inner.compare_and_set(task, expected_revision)

    async def delete_expired(self, now_ms: int) -> int:
        await self._enter("delete_expired")
        return await self.inner.delete_expired(now_ms)

    async def count(self) -> int:
        await self._enter("count")
        return await self.inner.count()


def store_server(store: FaultyStore, clock: WallClock) -> Server:
    server = Server("faults", "1", validation=Validation(outbound=True))
    server.add_extension(
        TasksExtension(store=store, clock=clock, ttl_ms=3_600_000, reap_interval=60)
    )

    @server.tool(options={"tasks": "optional"})
    async def sleepy() -> str:
        """Sleeps until cancelled."""
        await trio.sleep_forever()
        return "never"

    @server.tool(options={"tasks": "optional"})
    async def quick() -> str:
        """Answers at once."""
        await trio.lowlevel.checkpoint()
        return "quick"

    @server.tool(thread=False)  # on the loop: a worker thread would let MockClock jump
    def plain() -> str:
        """Never a task."""
        return "plain"

    return server


async def assert_still_serving(client: Client) -> None:
    """Requests that do not touch the task store are answered as usual."""
    assert (await client.discover())["resultType"] == "complete"
    assert {t["name"] for t in await client.list_tools()} == {"sleepy", "quick", "plain"}
    plain = await client.call_tool("plain")
    assert plain["content"] == [{"type": "text", "text": "plain"}]
    sync = await client.call_tool("quick", capabilities={})  # undeclared: runs synchronously
    assert sync["content"] == [{"type": "text", "text": "quick"}]


AFFECTED = {
    "create": ("tools/call", "handling tools/call failed"),
    "get": ("tasks/get", "handling tasks/get failed"),
    "compare_and_set": ("tasks/cancel", "handling tasks/cancel failed"),
    "delete_expired": (None, "the task reaper failed"),
}


@pytest.mark.parametrize("operation", list(AFFECTED))
async def test_a_failing_store_operation_fails_only_the_request_it_serves(
    operation: str, mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    mock_clock.autojump_threshold = 0
    caplog.set_level(logging.WARNING)
    store, clock = FaultyStore(), WallClock()
    async with open_client(store_server(store, clock), capabilities=WITH_TASKS) as client:
        runner = tasks_of(client).runner
        standing = await client.create_task("sleepy")
        await trio.testing.wait_all_tasks_blocked()
        stored = await store.inner.count()
        method, logged = AFFECTED[operation]

        store.failing.add(operation)
        if method is None:  # only the reaper deletes: one pass fails, no request does
            await trio.sleep(61)
        else:
            params = {"name": "quick"} if method == "tools/call" else {"taskId": standing}
            failed = await client.send(client.message(method, params))
            assert failed.status == 500
            assert failed.response is not None and failed.response["error"] == INTERNAL
            for leak in (SECRET_PATH.encode(), b"Errno", b"Traceback", b"OSError"):
                assert leak not in failed.body
        await assert_still_serving(client)
        if operation == "compare_and_set":
            await check_a_refused_cancel(client, store, runner, standing, caplog)
            return
        assert [r.getMessage() for r in caplog.records] == [logged]
        (record,) = caplog.records
        assert record.levelno == logging.ERROR and record.exc_info is not None
        assert SECRET_PATH in (record.exc_text or "")  # the detail goes to the log only
        # Nothing was half done: no new record, the standing task still runs.
        assert await store.inner.count() == stored
        standing_record = await store.inner.get(standing)
        assert standing_record is not None and standing_record.status == "working"
        assert runner.live_count == 1

        store.failing.clear()  # the store recovers
        task_id = await client.create_task("quick")
        with trio.fail_after(5):
            done = await client.wait_task(task_id)
        assert done["result"]["content"] == [{"type": "text", "text": "quick"}]
        assert (await client.get_task(standing))["status"] == "working"
        await client.cancel_task(standing)
        assert (await client.get_task(standing))["status"] == "cancelled"
        clock.now += 86_400  # every TTL (and any grace) has run out: the next pass deletes all
        await trio.sleep(61)  # past the reaper's next pass, whatever the phase
        assert await store.inner.count() == 0
        assert [r.getMessage() for r in caplog.records] == [logged]


async def check_a_refused_cancel(
    client: Client, store: FaultyStore, runner: Any, standing: str, caplog: Any
) -> None:
    """``tasks/cancel`` while the store refuses every write: the cancel still reaches the
    task (its work stops at once), the request answers -32603, and the outcome the store
    refused is recorded by itself once the store recovers."""
    prefix = f"recording the outcome of task {standing} failed"
    assert [r.getMessage() for r in caplog.records] == [
        f"{prefix} once; retrying",
        f"{prefix} once; retrying",
        f"{prefix} once; retrying",
        prefix,
        "handling tasks/cancel failed",
    ]
    assert runner.live_count == 0  # the work stopped
    assert runner.unsettled_count == 1
    stale = await store.inner.get(standing)
    assert stale is not None and stale.status == "working"  # the store took nothing
    store.failing.clear()  # the store recovers...
    await trio.sleep(6)  # ...and the runner's next offer is taken
    assert (await client.get_task(standing))["status"] == "cancelled"
    assert runner.unsettled_count == 0


async def test_a_stalled_store_is_bounded_by_the_clients_disconnect() -> None:
    """``tasks/get`` against a store that never answers: the client's disconnect ends it,
    and everything else is served meanwhile."""
    store, clock = FaultyStore(), WallClock()
    async with open_client(store_server(store, clock), capabilities=WITH_TASKS) as client:
        task_id = await client.create_task("quick")
        with trio.fail_after(5):
            await client.wait_task(task_id)
        store.stalled = True
        with trio.fail_after(5):
            async with client.stream("tasks/get", {"taskId": task_id}) as stream:
                await store.stall_entered.wait()
                await assert_still_serving(client)
                assert stream.status == 0  # no answer has started
                stream.disconnect()
        assert store.stalls_abandoned == 1 and stream.status == 0
        store.stalled = False
        assert (await client.get_task(task_id))["status"] == "completed"
