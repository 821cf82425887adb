"""The task runner on its own: nurseries, cancel scopes, parked channels, the mock clock."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio.errors import InternalError, ServiceUnavailable
from presa_trio.ext.tasks import MemoryTaskStore, Status, TaskLimits, TaskRecord
from presa_trio.ext.tasks._runner import SHARED_KEY_SETS, TaskHandle, TaskRunner
from presa_trio.ext.tasks._states import CancelRequested, Completed, InputsAccepted, apply


def record(task_id: str, ttl_ms: int | None = None) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        principal="",
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


async def launch(runner: TaskRunner, task_id: str, work: Any, ttl_ms: int | None = None) -> None:
    await runner.launch(record(task_id, ttl_ms), work, TaskLimits())


@pytest.mark.parametrize("steps", [0, 1, 2, 3, 5, 8])
async def test_a_cancel_racing_completion_ends_in_one_terminal_state_that_sticks(
    runner: TaskRunner, mock_clock: trio.testing.MockClock, steps: int
) -> None:
    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        for _ in range(steps):
            await trio.lowlevel.checkpoint()
        return {"resultType": "complete", "content": []}

    await launch(runner, "race", work)
    await runner.cancel("race")
    final = await runner.store.get("race")
    assert final is not None and final.status in (Status.CANCELLED, Status.COMPLETED)
    assert (final.result is not None) == (final.status is Status.COMPLETED)
    await trio.testing.wait_all_tasks_blocked()
    assert await runner.store.get("race") == final  # terminal states never change
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

    await launch(runner, "t", work)
    await trio.testing.wait_all_tasks_blocked()
    start = trio.current_time()
    await runner.cancel("t")
    assert log == ["finally"] and trio.current_time() == start
    assert len(runner.nursery.child_tasks) == 0


async def test_parked_input_waits_per_key_and_each_answer_is_delivered_alone(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        answers = await handle.provide(
            None, {"a": {"method": "roots/list"}, "b": {"method": "roots/list"}}
        )
        return {"resultType": "complete", "content": [], "answers": answers}

    await launch(runner, "p", work)
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


async def test_a_creation_cancelled_on_the_memory_store_stores_nothing_and_runs_nothing(
    runner: TaskRunner,
) -> None:
    """The memory store stores a record at its one checkpoint or not at all: a creation
    cancelled there (its request went away) needs no shield to leave nothing behind."""
    ran: list[str] = []

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        ran.append(handle.task_id)
        return {"resultType": "complete", "content": []}

    with trio.CancelScope() as scope:
        scope.cancel()
        await launch(runner, "gone", work)
    assert scope.cancelled_caught
    await launch(runner, "kept", work)
    await trio.testing.wait_all_tasks_blocked()
    assert await runner.store.get("gone") is None
    assert ran == ["kept"] and runner.live_count == 0


ROOTS = {"method": "roots/list"}


async def park_asking(runner: TaskRunner, task_id: str, keys: list[str]) -> TaskRecord:
    """Launch a task that asks ``keys`` in one round; its record once it is parked."""

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        await handle.provide(None, dict.fromkeys(keys, ROOTS))
        return {"resultType": "complete", "content": []}

    await launch(runner, task_id, work)
    await trio.testing.wait_all_tasks_blocked()
    parked = await runner.store.get(task_id)
    assert parked is not None and parked.status is Status.INPUT_REQUIRED
    return parked


async def test_tasks_that_ask_the_same_keys_share_one_set_of_them(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    """A tool's tasks ask the same keys, and a parked task holds its set of them for its
    whole life: the run keeps one copy of each."""
    one = await park_asking(runner, "t-1", ["region", "size"])
    other = await park_asking(runner, "t-2", ["size", "region"])
    assert one.used_keys == other.used_keys == frozenset({"region", "size"})
    assert one.used_keys is other.used_keys
    third = await park_asking(runner, "t-3", ["region"])
    assert third.used_keys == frozenset({"region"})  # another set, not a shared one
    for task_id in ("t-1", "t-2", "t-3"):
        await runner.cancel(task_id)


async def test_a_task_that_asks_many_keys_keeps_its_own_set_of_them(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    many = [f"step-{i}" for i in range(9)]
    one = await park_asking(runner, "t-1", many)
    other = await park_asking(runner, "t-2", many)
    assert one.used_keys == other.used_keys == frozenset(many)
    assert one.used_keys is not other.used_keys  # not kept in the run's table
    for task_id in ("t-1", "t-2"):
        await runner.cancel(task_id)


def test_the_run_keeps_a_bounded_number_of_key_sets() -> None:
    runner = TaskRunner(MemoryTaskStore(), lambda: 0)
    kept = [runner.shared_keys(frozenset({f"k{n}"})) for n in range(SHARED_KEY_SETS + 1)]
    # one more than it keeps: the oldest went, the newest stayed
    assert runner.shared_keys(frozenset({"k0"})) is not kept[0]
    assert runner.shared_keys(frozenset({f"k{SHARED_KEY_SETS}"})) is kept[-1]


@pytest.mark.parametrize("ending", ["the tool gives up", "tasks/cancel", "the TTL", "shutdown"])
async def test_a_round_is_withdrawn_only_when_its_task_goes_on(
    mock_clock: trio.testing.MockClock, ending: str
) -> None:
    """A wait that ends while the task goes on withdraws its keys (one more write); one
    that ends with its task goes straight to the task's end, as before."""
    mock_clock.autojump_threshold = 0
    seen: list[tuple[Status, list[str]]] = []
    runner = TaskRunner(
        MemoryTaskStore(),
        lambda: int(trio.current_time() * 1000),
        lambda record: seen.append((record.status, sorted(record.input_requests))),
    )

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        with trio.move_on_after(10 if ending == "the tool gives up" else math.inf):
            await handle.provide(None, {"a": ROOTS, "b": ROOTS})
        await trio.sleep(1)  # works on, without the answers
        return {"resultType": "complete", "content": []}

    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "t", work, ttl_ms=20_000 if ending == "the TTL" else None)
        await trio.testing.wait_all_tasks_blocked()
        if ending == "tasks/cancel":
            await runner.cancel("t")
        elif ending == "shutdown":
            nursery.cancel_scope.cancel()
        else:
            await trio.sleep(30)
        nursery.cancel_scope.cancel()
    final = {
        "the tool gives up": Status.COMPLETED,
        "tasks/cancel": Status.CANCELLED,
        "the TTL": Status.FAILED,
        "shutdown": Status.FAILED,
    }[ending]
    withdrawn = [(Status.WORKING, [])] if ending == "the tool gives up" else []
    assert seen == [(Status.INPUT_REQUIRED, ["a", "b"]), *withdrawn, (final, [])]
    assert runner.live_count == 0


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

    await launch(runner, "ttl", work, ttl_ms=5_000)
    await trio.sleep(10)  # the mock clock jumps; the 5 s TTL deadline fires on the way
    assert runner.live_count == 0
    assert log == [pytest.approx(5.0)]
    task = await runner.store.get("ttl")
    assert task is not None and task.status is Status.FAILED  # expired: not a client's cancel
    assert task.error == {"code": -32603, "message": "Task expired before it finished"}


async def test_a_cancel_whose_cleanup_outlasts_the_ttl_still_ends_cancelled(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    """A client's cancel is the task's own scope, the TTL its nursery's deadline: a cleanup
    that runs on past the TTL does not turn the cancel into an expiry."""
    mock_clock.autojump_threshold = 0

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        try:
            await trio.sleep(3600)
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(4)  # from 3 s to 7 s: past the 5 s TTL
        raise AssertionError("unreachable")

    await launch(runner, "t", work, ttl_ms=5_000)
    await trio.sleep(3)
    await runner.cancel("t")  # waits for the cleanup (within its 5 s bound)
    assert trio.current_time() == pytest.approx(7.0)
    task = await runner.store.get("t")
    assert task is not None and task.status is Status.CANCELLED
    assert task.status_message == "Cancellation requested" and task.error is None


def completes_after(finish: trio.Event) -> Any:
    """Work that completes once ``finish`` is set."""

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        await finish.wait()
        return {"resultType": "complete", "content": []}

    return work


# --- commits: from the record the runner wrote, refused once another worker moved it -------


class ReadCountingStore(MemoryTaskStore):
    """A memory store that counts its reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def get(self, task_id: str) -> TaskRecord | None:
        self.reads += 1
        return await super().get(task_id)


async def test_a_running_task_commits_without_reading_its_record_back() -> None:
    """Parking, an answer and the result: three commits, and the one read is ``deliver``'s
    own look at what is pending. A shared store pays a thread hop or a round trip a read."""
    store = ReadCountingStore()
    published: list[Status] = []
    runner = TaskRunner(store, lambda: 0, lambda record: published.append(record.status))

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        answers = await handle.provide(None, {"a": {"method": "roots/list"}})
        return {"resultType": "complete", "content": [], "answers": answers}

    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "t", work)
        await trio.testing.wait_all_tasks_blocked()
        assert await runner.deliver("t", {"a": {"roots": []}}) == {"a"}
        await trio.testing.wait_all_tasks_blocked()
        assert store.reads == 1
        done = await store.get("t")
        assert done is not None and done.status is Status.COMPLETED and done.revision == 3
        answers = {"a": {"roots": []}}
        assert done.result == {"resultType": "complete", "content": [], "answers": answers}
        assert published == [Status.INPUT_REQUIRED, Status.WORKING, Status.COMPLETED]
        nursery.cancel_scope.cancel()


async def cancel_elsewhere(store: MemoryTaskStore, task_id: str) -> None:
    """What another worker's ``tasks/cancel`` (or its lost-worker reaper) does: it moves the
    record on in the store, behind this runner's back."""
    current = await store.get(task_id)
    assert current is not None
    assert await store.compare_and_set(apply(current, CancelRequested(), 1), current.revision)


async def test_a_result_after_another_worker_ended_the_task_changes_nothing() -> None:
    store = ReadCountingStore()
    published: list[Status] = []
    runner = TaskRunner(store, lambda: 0, lambda record: published.append(record.status))
    finish = trio.Event()
    work = completes_after(finish)

    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "t", work)
        await trio.testing.wait_all_tasks_blocked()
        await cancel_elsewhere(store, "t")
        finish.set()
        with trio.fail_after(5):  # a runner that kept retrying its stale copy would spin
            await trio.testing.wait_all_tasks_blocked()
        final = await store.get("t")
        assert final is not None and final.status is Status.CANCELLED and final.result is None
        assert final.revision == 1 and published == []  # the stale write was refused
        assert runner.live_count == 0
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "event",
    [InputsAccepted(frozenset({"not-pending"})), Completed({"content": []})],
    ids=["nothing-to-change", "refused-write"],
)
async def test_a_commit_after_another_worker_ended_the_task_answers_from_the_store(
    event: Any,
) -> None:
    """Whether the runner's copy needed no change or its write was refused, the answer is
    what the store holds, not the runner's copy."""
    store = ReadCountingStore()
    runner = TaskRunner(store, lambda: 0)

    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "t", _sleeper)
        await trio.testing.wait_all_tasks_blocked()
        await cancel_elsewhere(store, "t")
        ended = await store.get("t")
        reads = store.reads
        with trio.fail_after(5):
            answer = await runner.commit("t", event)
        assert answer is ended and store.reads == reads + 1
        assert await store.get("t") is ended
        nursery.cancel_scope.cancel()


# --- error boundaries: nothing a task does reaches the runner or another task ----------------


async def _sleeper(handle: TaskHandle) -> Mapping[str, Any]:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def test_a_cleanup_that_raises_during_cancel_stays_in_its_task(
    runner: TaskRunner, mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def child_raises_in_finally(handle: TaskHandle) -> Mapping[str, Any]:
        async def child() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise OSError("cleanup failed")

        handle.nursery.start_soon(child)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    await launch(runner, "bystander", _sleeper)
    await launch(runner, "bad", child_raises_in_finally)
    await trio.testing.wait_all_tasks_blocked()
    await runner.cancel("bad")  # the group mixes Cancelled with the OSError
    bad = await runner.store.get("bad")
    assert bad is not None and bad.status is Status.CANCELLED
    assert "cleanup failed" in caplog.text
    assert runner.live_count == 1  # the bystander still runs, in a runner that still runs
    bystander = await runner.store.get("bystander")
    assert bystander is not None and bystander.status is Status.WORKING
    await runner.cancel("bystander")
    assert runner.live_count == 0


async def test_an_error_in_a_child_fails_only_its_task(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    async def child_fails(handle: TaskHandle) -> Mapping[str, Any]:
        async def child() -> None:
            raise KeyError("boom")

        handle.nursery.start_soon(child)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    await launch(runner, "bystander", _sleeper)
    await launch(runner, "child", child_fails)
    await trio.testing.wait_all_tasks_blocked()
    failed = await runner.store.get("child")
    assert failed is not None and failed.status is Status.FAILED
    assert failed.error == {"code": -32603, "message": "Internal error"}  # no detail leaks
    assert runner.live_count == 1


async def test_work_that_cancels_its_own_nursery_fails_its_task(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    async def gives_up(handle: TaskHandle) -> Mapping[str, Any]:
        handle.nursery.cancel_scope.cancel()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    await launch(runner, "t", gives_up)
    await trio.testing.wait_all_tasks_blocked()
    failed = await runner.store.get("t")
    assert failed is not None and failed.status is Status.FAILED
    assert failed.error == {
        "code": -32603,
        "message": "Task work was cancelled before it finished",
    }
    assert runner.live_count == 0


async def test_a_result_its_check_refuses_fails_the_task_with_that_error(
    mock_clock: trio.testing.MockClock,
) -> None:
    seen: list[Mapping[str, Any]] = []

    def check(result: Mapping[str, Any]) -> None:
        seen.append(result)
        if result.get("big"):
            raise InternalError("Task result is larger than 10 bytes")

    runner = TaskRunner(MemoryTaskStore(), lambda: int(trio.current_time() * 1000), check=check)

    async def answers(handle: TaskHandle) -> Mapping[str, Any]:
        await trio.lowlevel.checkpoint()
        return {"content": [], "big": handle.task_id == "big"}

    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "big", answers)
        await launch(runner, "small", answers)
        await trio.testing.wait_all_tasks_blocked()
        big, small = await runner.store.get("big"), await runner.store.get("small")
        nursery.cancel_scope.cancel()
    # the two ran in either order (trio's scheduler may reverse a batch); each was checked once
    assert sorted(seen, key=lambda result: result["big"]) == [
        {"content": [], "big": False},
        {"content": [], "big": True},
    ]
    assert big is not None and big.status is Status.FAILED and big.result is None
    assert big.error == {"code": -32603, "message": "Task result is larger than 10 bytes"}
    assert small is not None and small.status is Status.COMPLETED
    assert small.result == {"content": [], "big": False}


class BreakableStore:
    """Wraps a memory store; once ``broken``, every compare-and-set raises."""

    def __init__(self) -> None:
        self.inner = MemoryTaskStore()
        self.broken = False
        self.compare_and_sets_refused = 0

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        await self.inner.create(task, limits)

    async def get(self, task_id: str) -> TaskRecord | None:
        return await self.inner.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        if self.broken:
            await trio.lowlevel.checkpoint()
            self.compare_and_sets_refused += 1
            raise OSError("the disk is full")
        return await self.inner.compare_and_set(task, expected_revision)

    async def delete_expired(self, now_ms: int) -> int:
        return await self.inner.delete_expired(now_ms)

    async def count(self) -> int:
        return await self.inner.count()


async def test_a_store_that_fails_the_final_commit_leaks_nothing(
    mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    mock_clock.autojump_threshold = 0  # the runner retries the store after short pauses
    store = BreakableStore()
    runner = TaskRunner(store, lambda: int(trio.current_time() * 1000))
    finish = trio.Event()
    work = completes_after(finish)

    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "t", work)
        await launch(runner, "bystander", _sleeper)
        await trio.testing.wait_all_tasks_blocked()
        store.broken = True
        finish.set()
        await trio.sleep(2)  # past the three quick retries (the mock clock jumps)
        assert caplog.text.count("recording the outcome of task t failed once; retrying") == 3
        assert "recording the outcome of task t failed\n" in caplog.text  # then it gives up
        assert runner.live_count == 1  # "t" is gone from the books, the bystander runs on
        assert runner.unsettled_count == 1  # ...but its outcome is not forgotten
        store.broken = False  # the disk is back
        start = trio.current_time()
        await runner.cancel("t")  # nothing live to wait for: no 5 s stall
        assert trio.current_time() == start
        assert (await store.get("t")).status is Status.COMPLETED  # type: ignore[union-attr]
        await trio.sleep(10)  # the runner offers the outcome again: now a no-op
        assert runner.unsettled_count == 0
        assert store.compare_and_sets_refused == 4
        nursery.cancel_scope.cancel()


async def test_an_outcome_the_store_refused_is_recorded_once_it_recovers(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    store = BreakableStore()
    runner = TaskRunner(store, lambda: int(trio.current_time() * 1000))

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        store.broken = True  # the store fails as the outcome is recorded, for a long time
        return {"resultType": "complete", "content": []}

    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "t", work)
        await trio.sleep(30)  # quick retries, then offers every 5 s: all refused
        stuck = await store.get("t")
        assert stuck is not None and stuck.status is Status.WORKING
        assert runner.unsettled_count == 1
        store.broken = False
        await trio.sleep(6)  # the next offer is taken
        done = await store.get("t")
        assert done is not None and done.status is Status.COMPLETED
        assert runner.unsettled_count == 0
        nursery.cancel_scope.cancel()


async def test_a_publish_that_raises_is_contained(
    mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    def publish(record: TaskRecord) -> None:
        raise RuntimeError("the bus is gone")

    runner = TaskRunner(MemoryTaskStore(), lambda: int(trio.current_time() * 1000), publish)

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        return {"resultType": "complete", "content": []}

    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "t", work)
        await trio.testing.wait_all_tasks_blocked()
        done = await runner.store.get("t")
        assert done is not None and done.status is Status.COMPLETED
        assert "announcing task t failed" in caplog.text
        nursery.cancel_scope.cancel()


async def test_shutdown_records_stopped_not_cancelled(mock_clock: trio.testing.MockClock) -> None:
    runner = TaskRunner(MemoryTaskStore(), lambda: int(trio.current_time() * 1000))
    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "t", _sleeper)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    stopped = await runner.store.get("t")
    assert stopped is not None and stopped.status is Status.FAILED
    assert stopped.error == {
        "code": -32603,
        "message": "The server stopped before the task finished",
    }


async def test_a_task_is_registered_before_its_record_is_stored(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    seen: list[bool] = []

    original = runner.store.create

    async def create(task: TaskRecord, limits: TaskLimits) -> None:
        seen.append(task.task_id in runner._live)  # a tasks/cancel would find it already
        await original(task, limits)

    runner.store.create = create  # type: ignore[method-assign]
    await launch(runner, "t", _sleeper)
    assert seen == [True]
    await runner.cancel("t")


def _recorded() -> tuple[list[str], Any]:
    """Work that records that it started (and then completes at once)."""
    started: list[str] = []

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        started.append(handle.task_id)
        await trio.lowlevel.checkpoint()
        return {"content": []}

    return started, work


async def test_a_cancel_before_the_task_first_runs_means_its_work_never_starts(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    started, work = _recorded()
    await launch(runner, "t", work)  # spawned; it runs at the next checkpoint at the earliest
    await runner.cancel("t")  # cancels its scope, made at launch, before its first checkpoint
    assert started == []
    cancelled = await runner.store.get("t")
    assert cancelled is not None and cancelled.status is Status.CANCELLED
    assert runner.live_count == 0


async def test_a_ttl_over_before_the_task_first_runs_expires_it_unstarted(
    runner: TaskRunner, mock_clock: trio.testing.MockClock
) -> None:
    started, work = _recorded()
    await launch(runner, "t", work, ttl_ms=0)
    await trio.testing.wait_all_tasks_blocked()
    assert started == []
    expired = await runner.store.get("t")
    assert expired is not None and expired.status is Status.FAILED
    assert expired.error == {"code": -32603, "message": "Task expired before it finished"}
    assert runner.live_count == 0


async def test_a_store_that_recovers_while_retrying_records_the_outcome(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    store = BreakableStore()
    runner = TaskRunner(store, lambda: int(trio.current_time() * 1000))

    async def work(handle: TaskHandle) -> Mapping[str, Any]:
        store.broken = True  # the store fails just as the outcome is recorded...
        return {"resultType": "complete", "content": []}

    async with trio.open_nursery() as nursery:
        await nursery.start(runner.serve)
        await launch(runner, "t", work)
        await trio.sleep(0.01)  # ...for one attempt
        store.broken = False
        await trio.sleep(10)
        done = await store.get("t")
        assert done is not None and done.status is Status.COMPLETED
        assert store.compare_and_sets_refused >= 1
        nursery.cancel_scope.cancel()


async def test_a_runner_that_stops_while_a_record_is_stored_fails_that_task(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The creating request stored the record; the runner closed meanwhile: the creation is
    refused (503) and the record does not stay "working" with no work behind it."""
    store = MemoryTaskStore()
    runner = TaskRunner(store, lambda: int(trio.current_time() * 1000))
    release = trio.Event()
    original = store.create

    async def slow_create(task: TaskRecord, limits: TaskLimits) -> None:
        await release.wait()
        await original(task, limits)

    store.create = slow_create  # type: ignore[method-assign]
    refused: list[BaseException] = []

    async def create() -> None:
        try:
            await launch(runner, "late", _sleeper)
        except ServiceUnavailable as exc:
            refused.append(exc)

    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as nursery:
            await nursery.start(runner.serve)
            outer.start_soon(create)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()  # the runner stops, with no task in it
        release.set()
    assert len(refused) == 1 and runner.live_count == 0
    late = await store.get("late")
    assert late is not None and late.status is Status.FAILED
