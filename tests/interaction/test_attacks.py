"""Properties that must hold under attack: floods, disconnect storms, races, leaks, forgery,
DNS rebinding, header injection, path traversal and log amplification.

Each test states one property and drives the server through its public surface (the
schema-checking in-process client, or raw ASGI where the bytes matter). The tasks service of a
run (its ``runner`` and ``store``) is read only to check what the wire cannot show.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import posixpath
import secrets
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio
import trio.testing
from asgi_scope import http_scope
from ignored_answers import LOGGER, ignored_keys

from fixtures.conformance import build_server
from presa_trio import (
    AsgiApp,
    Context,
    HostPolicy,
    InvalidParams,
    KeyRing,
    RequestState,
    Server,
    Validation,
)
from presa_trio.ext.tasks import (
    EXTENSION_ID,
    MemoryTaskStore,
    Status,
    TaskLimits,
    TaskRecord,
    TasksExtension,
)
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, RpcError, open_client

WITH_TASKS: dict[str, Any] = {"elicitation": {}, "extensions": {EXTENSION_ID: {}}}
UNLIMITED = TaskLimits(
    max_tasks=None,
    max_stored_per_principal=None,
    max_active_per_principal=None,
    max_stored_bytes=None,
)
ASK = elicit("Value?", {"v": {"type": "string"}}, ["v"])
TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
UNKNOWN = {"code": -32602, "message": "Unknown or inaccessible taskId"}
INTERNAL = {"code": -32603, "message": "Internal error"}
V = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
}


# ---------------------------------------------------------------------- helpers


class WallClock:
    """The Tasks extension's wall clock (``clock=``), advanced by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def client_name(ctx: Context) -> str:
    """The principal: the clientInfo name of the request."""
    info = ctx.meta.client_info or {}
    return str(info.get("name", ""))


def tasks_of(client: Client) -> Any:
    runtime = client.app.runtime
    assert runtime is not None
    return runtime.service(EXTENSION_ID)


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


# ---------------------------------------------------------------------- 1. floods


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


# ---------------------------------------------------------------------- 2. disconnect storms


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


# ---------------------------------------------------------------------- 3. races


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


# ---------------------------------------------------------------------- 4. no detail leaks


def leaky_server(gates: list[trio.Event]) -> Server:
    """Tools with a bug, each failing once the newest gate opens."""
    server = Server("leaky", "1", validation=Validation(outbound=True))
    server.add_extension(TasksExtension())

    @server.tool(options={"tasks": "optional"})
    def sync_bug() -> str:
        """A bug in a sync tool (it runs in a worker thread)."""
        trio.from_thread.run(gates[-1].wait)
        raise RuntimeError("secret detail")

    @server.tool(options={"tasks": "optional"})
    async def async_bug() -> str:
        """A bug in an async tool."""
        await gates[-1].wait()
        raise RuntimeError("secret detail")

    @server.tool(options={"tasks": "optional"})
    async def child_bug() -> str:
        """A bug in a child task of an async tool (an exception group)."""

        async def child() -> None:
            await gates[-1].wait()
            raise RuntimeError("secret detail")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
        return "unreachable"

    return server


@pytest.mark.parametrize("tool", ["sync_bug", "async_bug", "child_bug"])
async def test_a_tool_bug_is_answered_without_its_detail(
    tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Directly: -32603 "Internal error", HTTP 500. As a task: ``failed`` with exactly that
    error. The detail is logged once per failure and appears in no response or notification."""
    caplog.set_level(logging.ERROR)
    gates = [trio.Event()]
    gates[-1].set()
    async with open_client(leaky_server(gates), capabilities=WITH_TASKS) as client:
        direct = await client.send(client.message("tools/call", {"name": tool}, capabilities={}))
        assert direct.status == 500
        assert direct.response is not None and direct.response["error"] == INTERNAL
        assert [r.getMessage() for r in caplog.records] == ["handling tools/call failed"]

        gates.append(trio.Event())
        created = await client.send(client.message("tools/call", {"name": tool}))
        assert created.response is not None
        task_id = created.response["result"]["taskId"]
        with trio.fail_after(5):
            async with client.listen({"taskIds": [task_id]}) as stream:
                await stream.next()  # the acknowledgement
                gates[-1].set()
                note = await stream.next()
                task = await client.wait_task(task_id)
                raw = await client.send(client.message("tasks/get", {"taskId": task_id}))
        assert task["status"] == "failed" and task["error"] == INTERNAL
        assert task["statusMessage"] == "Internal error" and "result" not in task
        assert note["method"] == "notifications/tasks"
        assert note["params"]["status"] == "failed" and note["params"]["error"] == INTERNAL
        for seen in (direct.body, created.body, raw.body, json.dumps(note).encode()):
            assert b"secret" not in seen and b"RuntimeError" not in seen
            assert b"Traceback" not in seen
        assert [r.getMessage() for r in caplog.records] == [
            "handling tools/call failed",
            f"task {task_id} failed",
        ]
        assert all("secret detail" in (r.exc_text or "") for r in caplog.records)


# ---------------------------------------------------------------------- 5. stubborn tools


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


# ---------------------------------------------------------------------- 6. isolation


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


# ---------------------------------------------------------------------- 7. requestState

STATE_TOOL = "test_input_required_result_request_state"
CONFIRMED = {"confirm": {"action": "accept", "content": {"ok": True}}}
REFUSED = {"code": -32602, "message": "requestState failed verification"}


async def issued(client: Client, arguments: dict[str, Any] | None = None) -> str:
    first = await client.call_tool(STATE_TOOL, arguments)
    assert first["resultType"] == "input_required"
    token: str = first["requestState"]
    return token


async def assert_refused(client: Client, method: str, params: dict[str, Any]) -> None:
    result = await client.send(client.message(method, params))
    assert result.status == 400, result.body
    assert result.response is not None and result.response["error"] == REFUSED


def retry(token: str, name: str = STATE_TOOL, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputResponses": CONFIRMED, "requestState": token, **extra}


async def test_a_genuine_request_state_completes() -> None:
    async with open_client(build_server(principal=client_name)) as client:
        token = await issued(client, {"a": 1})
        done = await client.request("tools/call", retry(token, arguments={"a": 1}))
        assert done["content"] == [{"type": "text", "text": "state-ok: confirmed=True"}]


async def test_forged_request_states_are_refused() -> None:
    """A random string, every single-character change of a real token, and a token of
    another server instance (other keys) are all refused with -32602."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
    async with (
        open_client(build_server()) as client,
        open_client(build_server()) as elsewhere,
    ):
        token = await issued(client)
        for forged in ("", "s1", secrets.token_urlsafe(96), "s1.k0.e30." + "A" * 43):
            await assert_refused(client, "tools/call", retry(forged))
        for at, char in enumerate(token):
            swap = alphabet[(alphabet.index(char) + 1) % len(alphabet)]
            await assert_refused(client, "tools/call", retry(token[:at] + swap + token[at + 1 :]))
        foreign = await issued(elsewhere)
        await assert_refused(client, "tools/call", retry(foreign))
        # The same token is good where it was issued: the refusal is about the keys.
        done = await elsewhere.request("tools/call", retry(foreign))
        assert done["content"][0]["text"] == "state-ok: confirmed=True"


async def test_a_token_of_an_instance_sharing_the_keys_verifies() -> None:
    keys = [("shared", b"k" * 32)]
    async with (
        open_client(build_server(request_state=RequestState(keys=KeyRing(keys)))) as one,
        open_client(build_server(request_state=RequestState(keys=KeyRing(keys)))) as two,
    ):
        token = await issued(one)
        assert (await two.request("tools/call", retry(token)))["resultType"] == "complete"


@pytest.mark.parametrize("reuse", ["other tool", "other arguments", "other principal", "prompt"])
async def test_request_state_reused_elsewhere_is_refused(reuse: str) -> None:
    async with open_client(build_server(principal=client_name)) as client:
        client.client_info = {"name": "alice", "version": "1"}
        token = await issued(client, {"a": 1})
        if reuse == "other tool":
            params = retry(token, "test_input_required_result_tampered_state", arguments={"a": 1})
            await assert_refused(client, "tools/call", params)
        elif reuse == "other arguments":
            await assert_refused(client, "tools/call", retry(token, arguments={"a": 2}))
        elif reuse == "other principal":
            client.client_info = {"name": "bob", "version": "1"}
            await assert_refused(client, "tools/call", retry(token, arguments={"a": 1}))
        else:
            params = {
                "name": "test_input_required_result_prompt",
                "inputResponses": {
                    "user_context": {"action": "accept", "content": {"context": "x"}}
                },
                "requestState": token,
            }
            await assert_refused(client, "prompts/get", params)
        client.client_info = {"name": "alice", "version": "1"}  # still good where it belongs
        done = await client.request("tools/call", retry(token, arguments={"a": 1}))
        assert done["resultType"] == "complete"


async def test_an_expired_request_state_is_refused() -> None:
    async with open_client(build_server(request_state=RequestState(ttl=-1))) as client:
        token = await issued(client)
        await assert_refused(client, "tools/call", retry(token))


# ---------------------------------------------------------------------- raw ASGI


def body_of(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {"_meta": META, **(params or {})},
    }
    return json.dumps(message).encode()


def headers_of(method: str, **extra: str | bytes) -> list[tuple[bytes, bytes]]:
    found = [
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", V.encode()),
        (b"mcp-method", method.encode()),
    ]
    for name, value in extra.items():
        raw = value if isinstance(value, bytes) else value.encode("latin-1")
        found.append((name.replace("_", "-").encode(), raw))
    return found


async def asgi(
    app: AsgiApp, body: bytes, headers: list[tuple[bytes, bytes]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One raw exchange: the ``http.response.start`` message and the decoded JSON body."""
    sent: list[dict[str, Any]] = []
    pending = [body]

    async def receive() -> dict[str, Any]:
        if pending:
            await trio.lowlevel.checkpoint()
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        sent.append(dict(message))

    scope = http_scope(headers)
    with trio.fail_after(5):
        await app(scope, receive, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    return sent[0], json.loads(sent[1]["body"])


# ---------------------------------------------------------------------- 8. DNS rebinding

ALLOWED_HOSTS = [
    "localhost",
    "localhost:8000",
    "LOCALHOST",
    "LocalHost:80",
    "127.0.0.1",
    "127.0.0.1:8000",
    "[::1]",
    "[::1]:80",
    "::1",
    None,  # no Host header at all (HTTP/1.0): nothing to rebind
]
REFUSED_HOSTS = [
    "evil.example",
    "evil.example:8000",
    "127.0.0.1.nip.io",
    "localhost.evil.com",
    "localhost.",  # a trailing dot is not normalised: refused
    "127.0.0.2",
    "0.0.0.0",
    "[::ffff:127.0.0.1]",
    "2130706433",
    "[::1",
    "localhost:8000:80",
    "",
]
ALLOWED_ORIGINS = [
    None,
    "null",
    "http://127.0.0.1:8000",
    "http://localhost",
    "https://LOCALHOST:3000",
    "http://[::1]:8000",
]
REFUSED_ORIGINS = [
    "http://evil.example",
    "https://localhost.evil.com",
    "http://127.0.0.1.nip.io:8000",
    "http://localhost.",
    "NULL",
    "file://",
    "file:///etc/passwd",
    "chrome-extension://abcdefgh",
    "ws://localhost",
    "http://",
    "http://[::1",
]


async def rebinding(app: AsgiApp, host: str | None, origin: str | None) -> Any:
    extra: dict[str, str] = {}
    if host is not None:
        extra["host"] = host
    if origin is not None:
        extra["origin"] = origin
    return await asgi(app, body_of("server/discover"), headers_of("server/discover", **extra))


@pytest.mark.parametrize("host", ALLOWED_HOSTS)
@pytest.mark.parametrize("origin", ALLOWED_ORIGINS)
async def test_loopback_hosts_and_origins_are_admitted(
    host: str | None, origin: str | None
) -> None:
    app = Server("rebind", "1").asgi_app()
    async with app.lifespan():
        start, body = await rebinding(app, host, origin)
    assert start["status"] == 200 and body["result"]["resultType"] == "complete"


@pytest.mark.parametrize("host", REFUSED_HOSTS)
async def test_foreign_hosts_are_refused(host: str) -> None:
    app = Server("rebind", "1").asgi_app()
    async with app.lifespan():
        start, body = await rebinding(app, host, "http://localhost")
    assert start["status"] == 403
    assert body == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": f"Forbidden: Host {host!r} is not allowed"},
    }


@pytest.mark.parametrize("host", ["localhost:8000", None])
@pytest.mark.parametrize("origin", REFUSED_ORIGINS)
async def test_foreign_origins_are_refused(host: str | None, origin: str) -> None:
    app = Server("rebind", "1").asgi_app()
    async with app.lifespan():
        start, body = await rebinding(app, host, origin)
    assert start["status"] == 403
    assert body == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": f"Forbidden: Origin {origin!r} is not allowed"},
    }


async def test_header_names_are_read_in_any_case() -> None:
    """ASGI servers give header names in lower case, but one that does not is read the same:
    its foreign Host is refused, and its routing headers route."""
    app = Server("rebind", "1").asgi_app()
    capitalized = [(name.title(), value) for name, value in headers_of("server/discover")]
    async with app.lifespan():
        foreign = await asgi(app, body_of("server/discover"), [*capitalized, (b"Host", b"x.io")])
        admitted = await asgi(app, body_of("server/discover"), capitalized)
        wrong = [*(h for h in capitalized if h[0] != b"Mcp-Method"), (b"MCP-Method", b"tools/list")]
        mismatched = await asgi(app, body_of("server/discover"), wrong)
    assert foreign[0]["status"] == 403
    refused = {"code": -32600, "message": "Forbidden: Host 'x.io' is not allowed"}
    assert foreign[1] == {"jsonrpc": "2.0", "error": refused}
    assert admitted[0]["status"] == 200 and admitted[1]["result"]["resultType"] == "complete"
    assert mismatched[0]["status"] == 400
    mismatch = "Mcp-Method header 'tools/list' does not match method 'server/discover'"
    assert mismatched[1] == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32020, "message": mismatch},
    }


async def test_a_configured_policy_admits_exactly_what_it_lists() -> None:
    policy = HostPolicy(
        allowed_hosts=frozenset({"mcp.example"}),
        allowed_origins=frozenset({"https://app.example"}),
    )
    app = Server("rebind", "1").asgi_app(host_policy=policy)
    async with app.lifespan():
        for host, origin, status in (
            ("mcp.example", "https://app.example", 200),
            ("MCP.example:443", "HTTPS://APP.EXAMPLE/", 200),  # case and a trailing slash
            ("mcp.example", "http://mcp.example", 200),  # same-host origin
            ("localhost", None, 403),  # the loopback default no longer applies
            ("mcp.example", "https://evil.example", 403),
            ("mcp.example", "https://app.example.evil.com", 403),
        ):
            start, _ = await rebinding(app, host, origin)
            assert start["status"] == status, (host, origin)
    open_app = Server("rebind", "1").asgi_app(host_policy=HostPolicy(enabled=False))
    async with open_app.lifespan():
        start, _ = await rebinding(open_app, "evil.example", "http://evil.example")
        assert start["status"] == 200


# ---------------------------------------------------------------------- 9. header injection

INJECTED = "x\r\nSet-Cookie: a=b"
INJECTED_B64 = "=?base64?" + base64.b64encode(INJECTED.encode()).decode() + "?="


def assert_clean_headers(start: dict[str, Any]) -> None:
    names = [name for name, _ in start["headers"]]
    assert sorted(names) == [b"content-length", b"content-type"]
    for name, value in start["headers"]:
        assert b"\r" not in name + value and b"\n" not in name + value
        assert b"set-cookie" not in name.lower() and b"a=b" not in value


@pytest.mark.parametrize(
    ("method", "params", "header", "expected"),
    [
        (
            "tools/call",
            {"name": "test_simple_text"},
            "mcp_name",
            f"Mcp-Name header {INJECTED!r} does not match 'test_simple_text'",
        ),
        (
            "resources/read",
            {"uri": "test://static-text"},
            "mcp_name",
            f"Mcp-Name header {INJECTED!r} does not match 'test://static-text'",
        ),
        (
            "tools/call",
            {"name": "test_header_param", "arguments": {"region": "eu"}},
            "mcp_param_region",
            "Mcp-Param-Region header does not match its argument",
        ),
    ],
)
async def test_crlf_in_a_base64_routing_header_is_never_reflected(
    method: str, params: dict[str, Any], header: str, expected: str
) -> None:
    app = build_server().asgi_app()
    hdrs = headers_of(method, **{header: INJECTED_B64})
    if header != "mcp_name":
        hdrs += [(b"mcp-name", params["name"].encode())]
    async with app.lifespan():
        start, body = await asgi(app, body_of(method, params), hdrs)
    assert start["status"] == 400
    assert body == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": expected}}
    assert_clean_headers(start)


async def test_crlf_matching_the_body_is_only_ever_json_escaped() -> None:
    """Header and body agree on a name holding CRLF: the unknown tool is named in the JSON
    body (escaped), never in a response header."""
    app = build_server().asgi_app()
    hdrs = headers_of("tools/call", mcp_name=INJECTED_B64)
    async with app.lifespan():
        start, body = await asgi(app, body_of("tools/call", {"name": INJECTED}), hdrs)
        raw_crlf = headers_of("tools/call", mcp_name=b"x\r\nSet-Cookie: a=b")
        start_raw, body_raw = await asgi(app, body_of("tools/call", {"name": "x"}), raw_crlf)
    assert start["status"] == 400
    assert body["error"] == {"code": -32602, "message": f"Unknown tool: {INJECTED}"}
    assert_clean_headers(start)
    assert start_raw["status"] == 400  # an unencoded CR/LF is refused outright
    assert body_raw["error"] == {
        "code": -32020,
        "message": "Header mcp-name has characters outside visible ASCII",
    }
    assert_clean_headers(start_raw)


# ---------------------------------------------------------------------- 10. path traversal


@pytest.mark.parametrize("value", ["../x", "a/b", "a?b", "a#b", "", "../../etc/passwd"])
async def test_a_template_variable_never_spans_a_path_segment(value: str) -> None:
    uri = f"test://template/{value}/data"
    async with open_client(build_server()) as client:
        with pytest.raises(RpcError) as caught:
            await client.read_resource(uri)
    assert (caught.value.code, caught.value.message, caught.value.data) == (
        -32602,
        "Resource not found",
        {"uri": uri},
    )
    assert caught.value.status == 400


@pytest.mark.parametrize("value", ["..%2Fx", "..", "%2e%2e", "..%2F..%2Fetc%2Fpasswd", "%00"])
async def test_a_template_variable_is_matched_as_the_literal_value(value: str) -> None:
    """No percent-decoding, no normalisation: the handler sees exactly the characters."""
    uri = f"test://template/{value}/data"
    async with open_client(build_server()) as client:
        result = await client.read_resource(uri)
    contents = result["contents"]
    assert len(contents) == 1 and contents[0]["uri"] == uri
    assert json.loads(contents[0]["text"])["id"] == value


RESERVED = [
    "../../etc/passwd",
    "a/../../x",
    "..%2F..%2Fetc",
    "%2e%2e/%2e%2e/x",
    "a/b/c.txt",
    "./a",
    "a//b",
    "...",
]


async def test_reserved_expansion_hands_the_raw_match_to_a_checking_handler() -> None:
    """``{+path}`` matches across ``/``; the handler receives the raw matched string and its
    own base check is what refuses ``..`` escapes."""
    server = Server("files", "1")
    received: list[str] = []

    @server.resource("file:///srv/base/{+path}")
    def read(path: str) -> str:
        received.append(path)
        resolved = posixpath.normpath(posixpath.join("/srv/base", path))
        if not resolved.startswith("/srv/base/"):
            raise InvalidParams("Path escapes the base")
        return resolved

    async with open_client(server) as client:
        outcome = {}
        for path in RESERVED:
            try:
                result = await client.read_resource(f"file:///srv/base/{path}")
                outcome[path] = result["contents"][0]["text"]
            except RpcError as error:
                outcome[path] = (error.code, error.message)
    assert received == RESERVED
    escaped = (-32602, "Path escapes the base")
    assert outcome == {
        "../../etc/passwd": escaped,
        "a/../../x": escaped,
        "..%2F..%2Fetc": "/srv/base/..%2F..%2Fetc",
        "%2e%2e/%2e%2e/x": "/srv/base/%2e%2e/%2e%2e/x",
        "a/b/c.txt": "/srv/base/a/b/c.txt",
        "./a": "/srv/base/a",
        "a//b": "/srv/base/a/b",
        "...": "/srv/base/...",
    }


# ---------------------------------------------------------------------- 11. log amplification


def surrogate_bodies() -> Iterator[bytes]:
    params = json.dumps({"_meta": META})
    ids = [rb'"\ud800"', rb'"\udfff"', rb'"a\udc00"', rb'"\udc00\ud800"', b'"\xed\xa0\x80"']
    for raw_id in itertools.islice(itertools.cycle(ids), 200):
        yield (
            b'{"jsonrpc":"2.0","id":'
            + raw_id
            + b',"method":"server/discover","params":'
            + params.encode()
            + b"}"
        )


async def test_lone_surrogate_ids_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    app = Server("surrogates", "1").asgi_app()
    messages = set()
    async with app.lifespan():
        for body in surrogate_bodies():
            start, answer_ = await asgi(app, body, headers_of("server/discover"))
            assert start["status"] == 400 and "id" not in answer_
            assert answer_["error"]["code"] == -32700
            messages.add(answer_["error"]["message"])
        # A valid surrogate pair is ordinary text: served.
        pair = body_of("server/discover", request_id="\U0001f600")
        start, answer_ = await asgi(app, pair, headers_of("server/discover"))
        assert start["status"] == 200 and answer_["id"] == "\U0001f600"
    assert messages == {
        "Parse error: a string holds an unpaired surrogate",
        "Parse error: body is not valid JSON",
    }
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [r for r in caplog.records if r.exc_info] == []
