"""Tasks under floods, disconnect storms and races, and probed by another principal: every task
ends, in one terminal state, with no record left without a runner; updates and cancels racing
each other commit once; another principal's task reads as an unknown one."""

from __future__ import annotations

import itertools
import json
import logging
import secrets
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio
import trio.testing
from support.ignored_answers import LOGGER, ignored_keys
from support.task_service import WITH_TASKS, client_name, tasks_of

from presa_trio import Context, Server, Validation
from presa_trio.ext.tasks import MemoryTaskStore, Status, TaskLimits, TaskRecord, TasksExtension
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, RpcError, open_client

UNLIMITED = TaskLimits(
    max_tasks=None,
    max_stored_per_principal=None,
    max_active_per_principal=None,
    max_stored_bytes=None,
)
ASK = elicit("Value?", {"v": {"type": "string"}}, ["v"])
TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
UNKNOWN = {"code": -32602, "message": "Unknown or inaccessible taskId"}


class WallClock:
    """The Tasks extension's wall clock (``clock=``), advanced by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def answer(value: str) -> dict[str, Any]:
    return {"k": {"action": "accept", "content": {"v": value}}}


class Ledger:
    """What the tools did, ordered on one counter shared with the store's writes."""

    def __init__(self) -> None:
        self.ticks: Iterator[int] = itertools.count()
        self.started: dict[str, float] = {}
        self.finished: dict[str, int] = {}


class TracingStore:
    """A ``MemoryTaskStore`` that waits ``delay`` seconds before every call and records every
    record it creates and every status it writes (with the ledger's tick for ``cancelled``)."""

    def __init__(self, ledger: Ledger, delay: float = 0.0) -> None:
        self.inner = MemoryTaskStore()
        self.ledger = ledger
        self.delay = delay
        self.created: list[str] = []
        self.history: dict[str, list[Status]] = defaultdict(list)
        self.cancelled_at: dict[str, int] = {}
        self.after_write: Callable[[TaskRecord], None] | None = None

    async def _pause(self) -> None:
        if self.delay:
            await trio.sleep(self.delay)

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        await self._pause()
        await self.inner.create(task, limits)
        self.created.append(task.task_id)
        self.history[task.task_id].append(task.status)

    async def get(self, task_id: str) -> TaskRecord | None:
        await self._pause()
        return await self.inner.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        await self._pause()
        written = await self.inner.compare_and_set(task, expected_revision)
        if written:
            self.history[task.task_id].append(task.status)
            if task.status is Status.CANCELLED:
                self.cancelled_at[task.task_id] = next(self.ledger.ticks)
            if self.after_write is not None:
                self.after_write(task)
        return written

    async def delete_expired(self, now_ms: int) -> int:
        await self._pause()
        return await self.inner.delete_expired(now_ms)

    async def count(self) -> int:
        await self._pause()
        return await self.inner.count()

    async def record(self, task_id: str) -> TaskRecord:
        found = await self.inner.get(task_id)
        assert found is not None, task_id
        return found


def assert_one_terminal_state(store: TracingStore, task_id: str) -> Status:
    """Exactly one terminal status was ever written for the task, and it was the last write."""
    history = store.history[task_id]
    terminal = [s for s in history if s in TERMINAL]
    assert len(terminal) == 1, (task_id, history)
    assert history[-1] is terminal[0], (task_id, history)
    return terminal[0]


def tasks_server(store: TracingStore | None = None, **options: Any) -> tuple[Server, Ledger]:
    """A server with the task tools the race and storm tests need."""
    ledger = store.ledger if store is not None else Ledger()
    server = Server("attacks", "1", validation=Validation(outbound=True))
    server.add_extension(
        TasksExtension(store=store, principal=client_name, limits=UNLIMITED, **options)
    )

    @server.tool(options={"tasks": "required"})
    async def job(ctx: Context, ms: float) -> str:
        """Works ``ms`` milliseconds (forever when negative), then notes that it finished."""
        task_id = ctx.extras["task_id"]
        ledger.started[task_id] = ms
        if ms < 0:
            await trio.sleep_forever()
        await trio.sleep(ms / 1000)
        ledger.finished[task_id] = next(ledger.ticks)
        return "finished"

    @server.tool(options={"tasks": "required"})
    async def quick(n: int) -> str:
        """Finishes after ``n`` checkpoints."""
        for _ in range(n):
            await trio.lowlevel.checkpoint()
        await trio.lowlevel.checkpoint()
        return "done"

    @server.tool(options={"tasks": "required"})
    async def parked(ctx: Context) -> str:
        """Parks on the input key ``k`` and returns the answer."""
        answers = await ctx.input({"k": ASK})
        return str(answers["k"]["content"]["v"])

    return server, ledger


def text_of(record: TaskRecord) -> str:
    assert record.result is not None
    return str(record.result["content"][0]["text"])


async def cut_call(client: Client, method: str, params: dict[str, Any], cut: float) -> None:
    """Send a request and drop the connection ``cut`` seconds later (0: at once)."""
    async with client.stream(method, params) as stream:
        if cut:
            await trio.sleep(cut)
        stream.disconnect()


# Where a storm's requests are cut, in seconds after they are sent: at once, inside each
# 5 ms store call, between them, and after the answer.
CUTS = (0, 0.001, 0.0025, 0.005, 0.006, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.03, 0.05)


async def test_thousands_of_tasks_all_end_and_the_store_keeps_only_what_is_within_ttl(
    mock_clock: trio.testing.MockClock,
) -> None:
    """5,000 instant tasks and 2,000 parked ones (1,000 cancelled, 1,000 left to expire):
    nothing stays live or parked, the store holds exactly what is within TTL once expired
    records are deleted, and the reaper empties it when every TTL has run out."""
    mock_clock.autojump_threshold = 0
    wall = WallClock()
    ext = TasksExtension(ttl_ms=60_000, clock=wall, limits=UNLIMITED, reap_interval=1_000)
    server = Server("flood", "1")
    server.add_extension(ext)

    @server.tool(options={"tasks": "required"})
    async def instant() -> str:
        """Completes at once."""
        await trio.lowlevel.checkpoint()
        return "done"

    @server.tool(options={"tasks": "required"})
    async def parked(ctx: Context) -> str:
        """Parks until answered."""
        answers = await ctx.input({"k": ASK})
        return str(answers["k"]["content"]["v"])

    async with open_client(server, capabilities=WITH_TASKS) as client:
        client.validate = False  # the server validates every request; speed matters here
        service = tasks_of(client)
        runner, store = service.runner, service.store
        # Wave 1, at wall time t0: parked tasks left to expire (deadline t0 + 60 s).
        expiring = [await client.create_task("parked") for _ in range(1_000)]
        await trio.testing.wait_all_tasks_blocked()
        assert (runner.live_count, runner.parked_count()) == (1_000, 1_000)
        wall.now += 30
        await trio.sleep(30)
        # Wave 2, at t0 + 30 s: instant tasks, and parked ones that are cancelled.
        done = [await client.create_task("instant") for _ in range(5_000)]
        cancelled = [await client.create_task("parked") for _ in range(1_000)]
        await trio.testing.wait_all_tasks_blocked()
        assert (runner.live_count, runner.parked_count()) == (2_000, 2_000)
        for task_id in cancelled:
            assert (await client.cancel_task(task_id))["resultType"] == "complete"
        assert (runner.live_count, runner.parked_count()) == (1_000, 1_000)
        # t0 + 60 s on both clocks: wave 1's TTL runs out while it is parked.
        wall.now += 30
        await trio.sleep(30)
        await trio.testing.wait_all_tasks_blocked()
        assert (runner.live_count, runner.parked_count()) == (0, 0)
        assert len(runner.nursery.child_tasks) == 0

        for task_id in done:
            record = await store.get(task_id)
            assert record.status is Status.COMPLETED and text_of(record) == "done"
        for task_id in cancelled:
            record = await store.get(task_id)
            assert (record.status, record.result) == (Status.CANCELLED, None)
        for task_id in expiring:
            record = await store.get(task_id)
            assert record.status is Status.FAILED
            assert record.error == {"code": -32603, "message": "Task expired before it finished"}
        # An expired task is unknown on the wire even before it is deleted.
        with pytest.raises(RpcError) as caught:
            await client.get_task(expiring[0])
        assert (caught.value.code, caught.value.message, caught.value.data) == (
            -32602,
            UNKNOWN["message"],
            None,
        )
        assert (await client.get_task(done[0]))["status"] == "completed"

        assert await store.count() == 7_000
        assert await store.delete_expired(ext.now_ms()) == 1_000
        assert await store.count() == 6_000  # exactly the records within their TTL
        for task_id in expiring:
            assert await store.get(task_id) is None
        for task_id in done + cancelled:
            record = await store.get(task_id)
            assert record is not None and not record.expired(ext.now_ms())

        wall.now += 86_400  # every TTL (and any grace) has run out: the reaper deletes all
        await trio.sleep(1_000)
        assert await store.count() == 0
        assert (runner.live_count, runner.parked_count()) == (0, 0)


async def test_creation_storm_leaves_no_working_record_without_a_runner(
    mock_clock: trio.testing.MockClock,
) -> None:
    """200 task creations cut at every point, against a store that yields 5 ms per call:
    every stored record is terminal or live in the runner, and each one's work ran."""
    mock_clock.autojump_threshold = 0
    store = TracingStore(Ledger(), delay=0.005)
    server, ledger = tasks_server(store)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        runner = tasks_of(client).runner
        async with trio.open_nursery() as nursery:
            for i in range(200):
                # Half run forever, half finish off the store's 5 ms grid.
                ms = -1 if i % 2 else 3.3 + 5 * (i % 7)
                params = {"name": "job", "arguments": {"ms": ms}}
                nursery.start_soon(cut_call, client, "tools/call", params, CUTS[i % len(CUTS)])
        await trio.sleep(1)
        await trio.testing.wait_all_tasks_blocked()

        records = {task_id: await store.record(task_id) for task_id in store.created}
        unfinished = [r for r in records.values() if r.status not in TERMINAL]
        assert len(unfinished) == runner.live_count
        assert runner.parked_count() == 0
        for task_id, record in records.items():
            assert task_id in ledger.started  # no record without its work
            if ledger.started[task_id] < 0:
                assert record.status is Status.WORKING
            else:
                assert record.status is Status.COMPLETED and task_id in ledger.finished
        assert len(records) == 200  # a creation that reached the server is never half done

        for record in unfinished:
            await client.cancel_task(record.task_id)
        assert runner.live_count == 0
        for task_id in store.created:
            assert assert_one_terminal_state(store, task_id) in TERMINAL


async def test_update_storm_never_accepts_inputs_the_task_did_not_receive(
    mock_clock: trio.testing.MockClock,
) -> None:
    """200 ``tasks/update`` calls cut at every point: each task either still waits for its
    key (shown pending, still parked) or received exactly that answer and completed."""
    mock_clock.autojump_threshold = 0
    store = TracingStore(Ledger(), delay=0.005)
    server, _ = tasks_server(store)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        runner = tasks_of(client).runner
        ids: list[str] = []

        async def create() -> None:
            ids.append(await client.create_task("parked"))

        async with trio.open_nursery() as nursery:
            for _ in range(200):
                nursery.start_soon(create)
        await trio.sleep(1)
        assert runner.parked_count() == 200

        async with trio.open_nursery() as nursery:
            for i, task_id in enumerate(ids):
                params = {"taskId": task_id, "inputResponses": answer(f"v{i}")}
                nursery.start_soon(cut_call, client, "tasks/update", params, CUTS[i % len(CUTS)])
        await trio.sleep(1)
        await trio.testing.wait_all_tasks_blocked()

        pending = []
        for i, task_id in enumerate(ids):
            record = await store.record(task_id)
            if record.status is Status.INPUT_REQUIRED:
                assert list(record.input_requests) == ["k"]
                pending.append((i, task_id))
            else:
                assert record.status is Status.COMPLETED, record
                assert text_of(record) == f"v{i}"
        assert runner.parked_count() == len(pending) == runner.live_count
        assert 0 < len(pending) < 200  # the cuts landed both before and after the commit

        for i, task_id in pending:  # the pending ones still take their answer
            assert await client.update_task(task_id, answer(f"v{i}")) == {
                "resultType": "complete",
                "_meta": {
                    "io.modelcontextprotocol/serverInfo": {"name": "attacks", "version": "1"}
                },
            }
        await trio.sleep(1)
        assert (runner.live_count, runner.parked_count()) == (0, 0)
        for i, task_id in enumerate(ids):
            record = await store.record(task_id)
            assert (record.status, text_of(record)) == (Status.COMPLETED, f"v{i}")


async def test_cancel_storm_never_records_cancelled_for_work_that_then_completes(
    mock_clock: trio.testing.MockClock,
) -> None:
    """200 ``tasks/cancel`` calls cut at every point: no task is recorded ``cancelled`` while
    its work goes on to finish afterwards (the tool notes when its body finished)."""
    mock_clock.autojump_threshold = 0
    store = TracingStore(Ledger(), delay=0.005)
    server, ledger = tasks_server(store)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        runner = tasks_of(client).runner
        ids: list[str] = []

        async def create(ms: float) -> None:
            ids.append(await client.create_task("job", {"ms": ms}))

        async with trio.open_nursery() as nursery:
            for i in range(200):
                # Off the store's 5 ms grid, so no finish coincides with a store write.
                nursery.start_soon(create, 3.3 + 5 * (i % 9) if i % 4 else 10_003.3)
        async with trio.open_nursery() as nursery:
            for i, task_id in enumerate(ids):
                params = {"taskId": task_id}
                nursery.start_soon(cut_call, client, "tasks/cancel", params, CUTS[i % len(CUTS)])
        await trio.sleep(20)
        await trio.testing.wait_all_tasks_blocked()
        assert runner.live_count == 0

        outcomes: dict[Status, int] = defaultdict(int)
        for task_id in ids:
            status = assert_one_terminal_state(store, task_id)
            outcomes[status] += 1
            finished = ledger.finished.get(task_id)
            if status is Status.CANCELLED:
                assert finished is None or finished < store.cancelled_at[task_id], task_id
            else:
                assert status is Status.COMPLETED and finished is not None
        assert outcomes[Status.CANCELLED] > 0 and outcomes[Status.COMPLETED] > 0


async def test_cancel_never_records_cancelled_for_work_already_woken() -> None:
    """The commit of ``cancelled`` lands while the task's work has already been woken (its
    wait ended in the same scheduling round): that work must not then run to completion
    under a ``cancelled`` record."""
    store = TracingStore(Ledger())
    server = Server("race", "1")
    server.add_extension(TasksExtension(store=store))
    gate = trio.Event()
    finished: list[str] = []

    @server.tool(options={"tasks": "required"})
    async def waiter(ctx: Context) -> str:
        """Waits for the gate, then finishes."""
        await gate.wait()
        finished.append(ctx.extras["task_id"])
        return "finished"

    def open_gate_on_cancel(record: TaskRecord) -> None:
        if record.status is Status.CANCELLED:
            gate.set()  # the waiter is woken in the very step that commits "cancelled"

    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await client.create_task("waiter")
        await trio.testing.wait_all_tasks_blocked()
        store.after_write = open_gate_on_cancel
        await client.cancel_task(task_id)
        await trio.testing.wait_all_tasks_blocked()
        task = await client.get_task(task_id)
        assert (task["status"], "result" in task) == ("cancelled", False)
        assert finished == []  # the work did not run to completion after "cancelled"


async def test_cancel_racing_completion_ends_in_one_terminal_state() -> None:
    """2,000 ``tasks/cancel`` calls racing tasks that complete within a few checkpoints."""
    store = TracingStore(Ledger())
    server, _ = tasks_server(store)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        client.validate = False
        runner = tasks_of(client).runner
        ids: list[str] = []

        async def race(n: int) -> None:
            task_id = await client.create_task("quick", {"n": n})
            ids.append(task_id)
            assert (await client.cancel_task(task_id))["resultType"] == "complete"

        for batch in range(40):
            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(race, (3 * i + batch) % 40)
        await trio.testing.wait_all_tasks_blocked()
        assert runner.live_count == 0

        settled = {task_id: await store.record(task_id) for task_id in ids}
        outcomes: dict[Status, int] = defaultdict(int)
        for n, task_id in enumerate(ids):
            outcomes[assert_one_terminal_state(store, task_id)] += 1
            if n % 10 == 0:  # the wire shows what is stored
                task = await client.get_task(task_id)
                assert task["status"] == settled[task_id].status.value
        assert set(outcomes) == {Status.COMPLETED, Status.CANCELLED}, outcomes  # real races
        await trio.sleep(0.01)
        for task_id in ids:  # read again: nothing changed once terminal
            assert await store.record(task_id) == settled[task_id]


async def test_update_racing_cancel_ends_in_one_terminal_state(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """1,000 ``tasks/update`` calls racing ``tasks/cancel`` on parked tasks: each update is
    acknowledged (SEP-2663: an answer to a task that ended is ignored, not refused)."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    store = TracingStore(Ledger())
    server, _ = tasks_server(store)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        client.validate = False
        runner = tasks_of(client).runner
        ids: list[str] = []
        refusals: list[tuple[int, str, Any]] = []

        async def update(task_id: str) -> None:
            try:
                await client.update_task(task_id, answer("raced"))
            except RpcError as error:  # never: an update that lost the race is acknowledged
                refusals.append((error.code, error.message, error.data))

        async def cancel(task_id: str, lag: int) -> None:
            for _ in range(lag):  # let the update get that many steps ahead
                await trio.lowlevel.checkpoint()
            await client.cancel_task(task_id)

        async def race(i: int) -> None:
            task_id = await client.create_task("parked")
            ids.append(task_id)
            if i % 2:
                await trio.testing.wait_all_tasks_blocked()  # parked before the race
            async with trio.open_nursery() as nursery:
                nursery.start_soon(update, task_id)
                nursery.start_soon(cancel, task_id, i % 16)

        for batch in range(20):
            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(race, batch + i)
        await trio.testing.wait_all_tasks_blocked()
        assert (runner.live_count, runner.parked_count()) == (0, 0)

        settled = {task_id: await store.record(task_id) for task_id in ids}
        outcomes: dict[Status, int] = defaultdict(int)
        for n, task_id in enumerate(ids):
            status = assert_one_terminal_state(store, task_id)
            outcomes[status] += 1
            if status is Status.COMPLETED:
                assert text_of(settled[task_id]) == "raced"
            if n % 10 == 0:  # the wire shows what is stored
                task = await client.get_task(task_id)
                assert task["status"] == status.value
        assert set(outcomes) == {Status.COMPLETED, Status.CANCELLED}, outcomes  # real races
        assert refusals == []
        ignored = {task_id: ignored_keys(caplog, task_id) for task_id in ids}
        for task_id in ids:
            assert ignored[task_id] in ([], [["k"]])  # used, or ignored (the task had ended)
            if settled[task_id].status is Status.COMPLETED:  # its answer was the one used
                assert ignored[task_id] == []
        assert any(ignored.values()), "no update lost its race: not a race"
        await trio.sleep(0.01)
        for task_id in ids:  # read again: nothing changed once terminal
            assert await store.record(task_id) == settled[task_id]


async def _five_updates(client: Client, task_id: str) -> list[tuple[str, dict[str, Any]]]:
    acks: list[tuple[str, dict[str, Any]]] = []

    async def update(value: str) -> None:
        acks.append((value, await client.update_task(task_id, answer(value))))

    async with trio.open_nursery() as nursery:
        for n in range(5):
            nursery.start_soon(update, f"answer-{n}")
    return acks


async def test_concurrent_updates_of_one_key_end_in_one_terminal_state() -> None:
    """5 concurrent ``tasks/update`` calls answering the same key, on 20 parked tasks: each
    task completes once, with one of the answers, and stays completed."""
    store = TracingStore(Ledger())
    server, _ = tasks_server(store)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        runner = tasks_of(client).runner
        for _ in range(20):
            task_id = await client.create_task("parked")
            await trio.testing.wait_all_tasks_blocked()
            acks = await _five_updates(client, task_id)
            assert all(ack["resultType"] == "complete" for _, ack in acks)
            await trio.testing.wait_all_tasks_blocked()
            assert assert_one_terminal_state(store, task_id) is Status.COMPLETED
            task = await client.get_task(task_id)
            assert task["result"]["content"][0]["text"] in {value for value, _ in acks}
            await trio.testing.wait_all_tasks_blocked()
            assert await client.get_task(task_id) == task
        assert (runner.live_count, runner.parked_count()) == (0, 0)


async def test_concurrent_updates_of_one_key_use_one_answer_and_log_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Of 5 concurrent answers to one key, the task receives one; all five are acknowledged
    alike (SEP-2663), and the four dropped are each logged as ignored for the operator (an
    answer dropped silently would be hidden from everyone)."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    server, _ = tasks_server(TracingStore(Ledger()))
    async with open_client(server, capabilities=WITH_TASKS) as client:
        task_id = await client.create_task("parked")
        await trio.testing.wait_all_tasks_blocked()
        acks = await _five_updates(client, task_id)
        await trio.testing.wait_all_tasks_blocked()
        used = (await client.get_task(task_id))["result"]["content"][0]["text"]
        assert used in {value for value, _ in acks}
        assert len({json.dumps(ack, sort_keys=True) for _, ack in acks}) == 1, acks
        assert ignored_keys(caplog, task_id) == [["k"]] * 4


async def test_concurrent_cancels_of_one_task_commit_once() -> None:
    """10 concurrent ``tasks/cancel`` calls on one task (working or parked), 20 times: all
    acknowledged, one ``cancelled`` write, and it never changes."""
    store = TracingStore(Ledger())
    server, _ = tasks_server(store)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        runner = tasks_of(client).runner
        for i in range(20):
            if i % 2:
                task_id = await client.create_task("parked")
            else:
                task_id = await client.create_task("job", {"ms": -1})
            await trio.testing.wait_all_tasks_blocked()
            acks: list[dict[str, Any]] = []

            async def cancel(task_id: str = task_id, acks: list[dict[str, Any]] = acks) -> None:
                acks.append(await client.cancel_task(task_id))

            async with trio.open_nursery() as nursery:
                for _ in range(10):
                    nursery.start_soon(cancel)
            assert len(acks) == 10 and all(set(ack) == {"resultType", "_meta"} for ack in acks)
            assert assert_one_terminal_state(store, task_id) is Status.CANCELLED
            assert store.history[task_id].count(Status.CANCELLED) == 1
            task = await client.get_task(task_id)
            assert task["status"] == "cancelled"
            await trio.testing.wait_all_tasks_blocked()
            assert await client.get_task(task_id) == task
        assert (runner.live_count, runner.parked_count()) == (0, 0)


async def test_another_principals_task_is_indistinguishable_from_an_unknown_one() -> None:
    server, _ = tasks_server()
    async with open_client(server, capabilities=WITH_TASKS) as client:
        client.client_info = {"name": "alice", "version": "1"}
        working = await client.create_task("job", {"ms": -1})
        waiting = await client.create_task("parked")
        finished = await client.create_task("quick", {"n": 0})
        await trio.testing.wait_all_tasks_blocked()
        assert (await client.get_task(finished))["status"] == "completed"
        ack = await client.update_task(finished, answer("x"))  # alice's own task: acknowledged
        assert ack["resultType"] == "complete"

        client.client_info = {"name": "mallory", "version": "1"}
        flipped = working[:-1] + ("A" if working[-1] != "A" else "B")
        ids = [working, waiting, finished, secrets.token_urlsafe(24), flipped, "x"]
        seen = set()
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            for task_id in ids:
                params: dict[str, Any] = {"taskId": task_id}
                if method == "tasks/update":
                    params["inputResponses"] = answer("stolen")
                result = await client.send(client.message(method, params))
                assert result.response is not None and "result" not in result.response
                seen.add((result.status, json.dumps(result.response["error"], sort_keys=True)))
        assert seen == {(400, json.dumps(UNKNOWN, sort_keys=True))}
        with trio.fail_after(5):
            async with client.listen({"taskIds": [working, waiting, finished]}) as stream:
                ack = await stream.next()
        assert ack["params"]["notifications"] == {}  # nothing of alice's is selected

        client.client_info = {"name": "alice", "version": "1"}  # untouched by mallory
        assert (await client.get_task(working))["status"] == "working"
        assert list((await client.get_task(waiting))["inputRequests"]) == ["k"]
        assert (await client.get_task(finished))["status"] == "completed"

        real = [working, waiting, finished]
        guesses = [secrets.token_urlsafe(24) for _ in range(1_500)]
        for n in range(500):  # near misses: a real id with one character changed
            base = real[n % 3]
            at = n % len(base)
            swap = "-" if base[at] != "-" else "_"
            guesses.append(base[:at] + swap + base[at + 1 :])
        hits = 0
        for guess in guesses:
            result = await client.send(client.message("tasks/get", {"taskId": guess}))
            assert result.response is not None
            if "result" in result.response:
                hits += 1
            else:
                assert result.response["error"] == UNKNOWN
        assert hits == 0
        await client.cancel_task(working)
        await client.cancel_task(waiting)
