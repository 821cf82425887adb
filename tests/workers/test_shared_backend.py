"""Two workers sharing one SQLite backend, in process: two runs of one server, each with its
own backend handle, runner and bus, as two hypercorn workers have (test_workers.py has the
real processes). Every request goes to the worker the test names, so each cross-worker path is
taken for certain: create on A, read, answer and cancel on B.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio
from support.ignored_answers import LOGGER, ignored_keys
from support.postgres_cluster import Cluster

from presa_trio import Context, Server
from presa_trio._backends.postgres import WRITE_LOCK
from presa_trio.backends import Backend, MemoryBackend, SharedBackend, open_backend
from presa_trio.errors import CapacityExceeded, ServiceUnavailable
from presa_trio.ext.tasks import (
    MemoryTaskStore,
    TaskLimits,
    TaskRecord,
    TasksExtension,
    TaskStore,
    default_store,
)
from presa_trio.ext.tasks._sql_store import SqlTaskStore
from presa_trio.ext.tasks.testing import check_lease_store, check_task_store
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, RpcError, open_client

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
QUESTION = elicit("Go?", {"go": {"type": "boolean"}}, ["go"])
YES = {"action": "accept", "content": {"go": True}}


def build(
    events: list[str],
    limits: TaskLimits | None = None,
    store_factory: Callable[[Backend], TaskStore] | None = None,
) -> Server:
    server = Server("shared", "1")
    server.add_extension(
        TasksExtension(
            poll_interval_ms=10, limits=limits, reap_interval=0.05, store_factory=store_factory
        )
    )

    @server.tool(options={"tasks": "optional"})
    async def sleeper() -> str:
        """Sleeps; its cleanup takes a while and says when it finished."""
        try:
            await trio.sleep(60)
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.2)
                events.append("cleaned up")
        return "woke"

    @server.tool(options={"tasks": "optional"})
    async def impatient(ctx: Context) -> str:
        """Gives up on "late" after a moment, and asks "next" instead."""
        with trio.move_on_after(0.05):
            await ctx.input({"late": QUESTION})
        answer = await ctx.input({"next": QUESTION})
        return f"next={answer['next']['content']['go']}"

    @server.tool(options={"tasks": "optional"})
    async def asker(ctx: Context) -> str:
        """Asks one question, as a task parks on it."""
        answer = await ctx.input({"go": QUESTION})
        return f"go={answer['go']['content']['go']}"

    @server.resource("test://doc")
    def doc() -> str:
        """A document whose updates listeners follow."""
        return "text"

    @server.tool()
    async def question(ctx: Context) -> str:
        """Asks one question, as a plain call does: by MRTR rounds."""
        answer = await ctx.input({"go": QUESTION})
        return f"go={answer['go']['content']['go']}"

    @server.tool()
    def announce(ctx: Context) -> int:
        """Announce a tool-list change and a resource update from this worker."""
        ctx.runtime.notify_resource_updated("test://doc")
        return ctx.runtime.notify_tools_changed()

    return server


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same tests on each shared backend. No test here loses a worker: a lease of
    seconds, so a loaded machine's late heartbeat never makes one lost, and a timeout of
    seconds, so a write waiting behind another's lock is not refused."""
    if request.param == "postgresql":
        cluster: Cluster = request.getfixturevalue("postgres")
        return cluster.new_database() + "&lease=4&timeout=2"
    return sqlite_url(tmp_path)


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/shared.db?poll=0.005&lease=4&timeout=2"


Workers = Callable[..., AbstractAsyncContextManager[tuple[Client, Client]]]


@asynccontextmanager
async def two_workers(server: Server, url: str) -> AsyncIterator[tuple[Client, Client]]:
    async with (
        open_client(server.asgi_app(backend=url), capabilities=TASKS) as a,
        open_client(server.asgi_app(backend=url), capabilities=TASKS) as b,
    ):
        assert a.app is not b.app
        yield a, b


async def wait_status(client: Client, task_id: str, *statuses: str) -> dict[str, Any]:
    with trio.fail_after(5):
        return await client.wait_task(task_id, statuses)


async def test_a_task_made_on_one_worker_is_read_answered_and_finished_on_another(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with two_workers(build([]), url) as (a, b):
        task_id = await a.create_task("asker")
        parked = await wait_status(b, task_id, "input_required")
        assert parked["inputRequests"] == {"go": QUESTION}
        ack = await b.update_task(task_id, {"go": YES})
        assert ack["resultType"] == "complete"
        assert ignored_keys(caplog) == []  # the owner took the answer
        done = await wait_status(b, task_id, "completed", "failed")
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "go=True"}]
        assert await a.get_task(task_id) == done


async def test_an_answer_nobody_waits_for_is_ignored_across_workers(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with two_workers(build([]), url) as (a, b):
        task_id = await a.create_task("asker")
        await wait_status(b, task_id, "input_required")
        ack = await b.update_task(task_id, {"go": YES, "other": YES})
        assert ack["resultType"] == "complete"
        assert ignored_keys(caplog, task_id) == [["other"]]  # what the owner said it took
        done = await wait_status(a, task_id, "completed")
        assert done["result"]["content"] == [{"type": "text", "text": "go=True"}]
        assert await b.update_task(task_id, {"go": YES}) == ack  # finished: the same ack
        assert ignored_keys(caplog, task_id) == [["other"], ["go"]]


async def test_a_question_the_tool_gave_up_on_is_withdrawn_and_its_answer_ignored(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with two_workers(build([]), url) as (a, b):
        task_id = await a.create_task("impatient")
        with trio.fail_after(5):
            while True:  # "late" asked, given up on (withdrawn), then "next" asked
                asked = (await b.get_task(task_id)).get("inputRequests", {})
                if list(asked) == ["next"]:
                    break
                await trio.sleep(0.01)
        ack = await b.update_task(task_id, {"late": YES, "next": YES})
        assert ack["resultType"] == "complete"
        done = await wait_status(a, task_id, "completed")
        assert done["result"]["content"] == [{"type": "text", "text": "next=True"}]
        assert ignored_keys(caplog, task_id) == [["late"]]


async def test_cancel_on_another_worker_reaches_the_scope_and_acks_after_cleanup(
    url: str,
) -> None:
    events: list[str] = []
    async with two_workers(build(events), url) as (a, b):
        task_id = await a.create_task("sleeper")
        assert (await b.get_task(task_id))["status"] == "working"
        await b.cancel_task(task_id)
        assert events == ["cleaned up"], "the ack came before the owner's cleanup finished"
        assert (await b.get_task(task_id))["status"] == "cancelled"
        assert (await a.get_task(task_id))["status"] == "cancelled"


async def test_mrtr_round_two_verifies_on_another_worker_and_after_a_restart(url: str) -> None:
    server = build([])
    async with two_workers(server, url) as (a, b):
        asked = await a.call_tool("question", {})
        assert asked["resultType"] == "input_required"
        state = asked["requestState"]
        done = await b.call_tool("question", {}, input_responses={"go": YES}, request_state=state)
        assert done["content"] == [{"type": "text", "text": "go=True"}]
    async with open_client(server.asgi_app(backend=url), capabilities=TASKS) as again:
        done = await again.call_tool(
            "question", {}, input_responses={"go": YES}, request_state=state
        )
        assert done["content"] == [{"type": "text", "text": "go=True"}]


async def test_changes_announced_on_one_worker_reach_listeners_on_the_other(url: str) -> None:
    async with two_workers(build([]), url) as (a, b):
        wanted = {"toolsListChanged": True, "resourceSubscriptions": ["test://"]}
        async with b.listen(wanted) as stream:
            first = await stream.next()
            assert first["method"] == "notifications/subscriptions/acknowledged"
            for _ in range(3):
                local = await a.call_tool("announce", {})
                assert local["content"] == [{"type": "text", "text": "0"}]  # none listen on A
                seen = set()
                with trio.fail_after(5):
                    while len(seen) < 2:
                        seen.add((await stream.next())["method"])
                assert seen == {
                    "notifications/tools/list_changed",
                    "notifications/resources/updated",
                }


async def test_task_notifications_reach_a_listener_on_another_worker(url: str) -> None:
    async with two_workers(build([]), url) as (a, b):
        task_id = await a.create_task("asker")
        await wait_status(a, task_id, "input_required")
        async with b.listen({"taskIds": [task_id]}) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"] == {"taskIds": [task_id]}
            await a.update_task(task_id, {"go": YES})
            with trio.fail_after(5):
                while True:
                    note = await stream.next()
                    assert note["method"] == "notifications/tasks"
                    if note["params"]["status"] == "completed":
                        break
            task = await b.get_task(task_id)
            shown = {k: v for k, v in task.items() if k not in ("resultType", "_meta")}
            assert {k: v for k, v in note["params"].items() if k != "_meta"} == shown


async def test_capacity_limits_hold_across_workers(url: str) -> None:
    limits = TaskLimits(max_tasks=3, max_stored_per_principal=None, max_active_per_principal=None)
    async with two_workers(build([], limits), url) as (a, b):
        await a.create_task("asker")
        await b.create_task("asker")
        await a.create_task("asker")
        for client in (a, b):
            with pytest.raises(RpcError) as refused:
                await client.create_task("asker")
            assert refused.value.status == 503
            assert refused.value.data == {"retryable": True, "limit": "max_tasks"}


async def test_a_finished_task_survives_a_restart(url: str) -> None:
    server = build([])
    async with two_workers(server, url) as (a, _):
        task_id = await a.create_task("asker")
        await wait_status(a, task_id, "input_required")
        await a.update_task(task_id, {"go": YES})
        done = await wait_status(a, task_id, "completed")
    async with open_client(server.asgi_app(backend=url), capabilities=TASKS) as again:
        assert await again.get_task(task_id) == done


async def test_a_locked_database_is_a_retryable_503_and_the_server_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with two_workers(build([]), sqlite_url(tmp_path)) as (a, _):
        task_id = await a.create_task("asker")
        await wait_status(a, task_id, "input_required")
        holder = sqlite3.connect(tmp_path / "shared.db", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock too long
        try:
            with pytest.raises(RpcError) as failed:
                await a.create_task("asker")
            assert failed.value.status == 503
            assert (failed.value.code, failed.value.message) == (
                -32603,
                "Shared state is unavailable; retry later",
            )
            assert failed.value.data == {"retryable": True}
            # WAL: readers never wait for the writer, so reading still works meanwhile
            assert (await a.get_task(task_id))["status"] == "input_required"
            assert [t["name"] for t in await a.list_tools()] == [
                "announce",
                "asker",
                "impatient",
                "question",
                "sleeper",
            ]
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert (await a.get_task(task_id))["status"] == "input_required"
        await a.create_task("asker")
    assert not [r for r in caplog.records if r.exc_info], "a database fault logged a traceback"
    assert not any(
        str(tmp_path) in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
    )


async def test_a_statement_that_waits_too_long_is_a_retryable_503_on_postgresql(
    postgres: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Another session holds the lock every write takes: writes give up after the store's
    ``timeout`` (PostgreSQL's lock_timeout), reads carry on, and it all recovers."""
    url = postgres.new_database() + "&lease=5&timeout=0.5"
    async with two_workers(build([]), url) as (a, _):
        task_id = await a.create_task("asker")
        await wait_status(a, task_id, "input_required")
        holder = psycopg.connect(url.split("&lease")[0], autocommit=True)
        holder.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK,))
        try:
            started = trio.current_time()
            with pytest.raises(RpcError) as failed:
                await a.create_task("asker")
            assert trio.current_time() - started < 5
            assert failed.value.status == 503
            assert (failed.value.code, failed.value.message) == (
                -32603,
                "Shared state is unavailable; retry later",
            )
            assert (await a.get_task(task_id))["status"] == "input_required"
        finally:
            holder.close()
        await a.update_task(task_id, {"go": YES})
        assert (await wait_status(a, task_id, "completed"))["status"] == "completed"
        await a.create_task("asker")
    assert not [r for r in caplog.records if r.exc_info], "a database fault logged a traceback"


async def test_connections_cut_by_postgresql_are_replaced_and_nothing_is_lost(
    postgres: Cluster,
) -> None:
    """The server ends every session of the database (a failover, an admin): the pool lends
    only checked connections, the listener reconnects, and signals sent meanwhile are read
    from their rows: a cancel and an answer across workers still arrive."""
    url = postgres.new_database() + "&lease=5&timeout=2"
    events: list[str] = []
    async with two_workers(build(events), url) as (a, b):
        parked = await a.create_task("asker")
        running = await a.create_task("sleeper")
        await wait_status(b, parked, "input_required")
        with psycopg.connect(url.split("&lease")[0], autocommit=True) as admin:
            cut = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        assert cut is not None and cut[0] >= 2  # the pools' and the listeners' sessions
        with trio.fail_after(10):
            while True:  # a connection cut mid-request may cost one retryable 503
                try:
                    await b.update_task(parked, {"go": YES})
                    break
                except RpcError as failed:
                    assert failed.status == 503
                    await trio.sleep(0.1)
        assert (await wait_status(b, parked, "completed"))["status"] == "completed"
        await b.cancel_task(running)
        assert events == ["cleaned up"]
        assert (await a.get_task(running))["status"] == "cancelled"


# ------------------------------------------------------------------ a store of one's own


class Shelf:
    """Task records every worker of the test sees: what a store of a user's own (on Redis,
    say) shares between workers, here in this process."""

    def __init__(self) -> None:
        self.records: dict[str, TaskRecord] = {}


class ShelfStore:
    """A ``TaskStore`` that keeps leases (``LeaseStore``), written here against the
    contracts alone. ``cut_off`` makes every later call fail, as a worker that lost its
    store, and then its process, finds."""

    def __init__(self, shelf: Shelf) -> None:
        self.records = shelf.records
        self.cut_off = False

    async def _write(self) -> None:
        await trio.lowlevel.checkpoint()
        if self.cut_off:
            raise ServiceUnavailable("This worker lost its store")

    async def _read(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        if self.cut_off:
            raise ServiceUnavailable("This worker lost its store")

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        await self._write()
        if task.task_id in self.records:
            raise ValueError(f"task {task.task_id!r} exists")
        theirs = [r for r in self.records.values() if r.principal == task.principal]
        active = sum(not r.terminal for r in theirs)
        refused = limits.refusal(len(self.records), len(theirs), active)
        if refused is not None:
            raise CapacityExceeded(refused, "Task capacity exhausted")
        self.records[task.task_id] = task

    async def get(self, task_id: str) -> TaskRecord | None:
        await self._read()
        return self.records.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        await self._write()
        current = self.records.get(task.task_id)
        if current is None or current.revision != expected_revision:
            return False
        self.records[task.task_id] = task
        return True

    async def delete_expired(self, now_ms: int) -> int:
        await self._write()
        expired = [r.task_id for r in self.records.values() if r.expired(now_ms)]
        for task_id in expired:
            del self.records[task_id]
        return len(expired)

    async def count(self) -> int:
        await self._read()
        return len(self.records)

    async def owners(self) -> frozenset[str]:
        await self._read()
        return frozenset(r.owner for r in self.records.values() if not r.terminal)

    async def orphans(self, lost: frozenset[str]) -> list[str]:
        await self._read()
        return [r.task_id for r in self.records.values() if not r.terminal and r.owner in lost]


async def test_the_store_written_here_keeps_the_store_and_lease_contracts() -> None:
    await check_task_store(lambda: contextlib.nullcontext(ShelfStore(Shelf())))
    await check_lease_store(lambda: contextlib.nullcontext(ShelfStore(Shelf())))


async def test_a_store_of_ones_own_that_keeps_leases_fails_the_tasks_of_a_lost_worker(
    tmp_path: Path,
) -> None:
    """The store is chosen by the ``store_factory`` hook, one view of the shelf for each
    worker's run. Worker A runs a task, then loses its store and goes away without
    recording how the task ended (its process died, say); B, which shares the backend's
    leases, finds A lost and fails the task, as the SQL store's tasks are."""
    shelf = Shelf()
    views: dict[str, ShelfStore] = {}

    def view_for(backend: Backend) -> TaskStore:
        return views.setdefault(backend.worker_id, ShelfStore(shelf))

    server = build([], store_factory=view_for)
    url = f"sqlite:///{tmp_path}/shared.db?poll=0.005&lease=1&timeout=2"
    async with open_client(server.asgi_app(backend=url), capabilities=TASKS) as b:
        async with open_client(server.asgi_app(backend=url), capabilities=TASKS) as a:
            task_id = await a.create_task("sleeper")
            assert (await b.get_task(task_id))["status"] == "working"
            owner = shelf.records[task_id].owner
            assert owner in views and len(views) == 2
            views[owner].cut_off = True
        assert shelf.records[task_id].status.value == "working"  # A could record nothing
        with trio.fail_after(30):  # within a lease and a quarter, and B's first lease
            failed = await b.wait_task(task_id, ("failed", "completed", "cancelled"))
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": -32603, "message": "The worker running this task was lost"}


async def test_the_default_store_is_the_database_of_a_backend_that_has_one(
    tmp_path: Path,
) -> None:
    """``default_store``, the hook ``TasksExtension`` uses unless given another: a backend
    on a SQL database keeps the tasks there, any other this process's memory."""
    assert isinstance(default_store(MemoryBackend()), MemoryTaskStore)
    async with open_backend(sqlite_url(tmp_path)) as backend:
        assert isinstance(backend, SharedBackend)
        store = default_store(backend)
        assert isinstance(store, SqlTaskStore) and store.db is backend.db
    with pytest.raises(ValueError, match="not both"):
        TasksExtension(store=MemoryTaskStore(), store_factory=default_store)
