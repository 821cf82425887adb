"""The TaskStore contract, as a reusable suite: every store in STORES must pass all of it.

A new store (durable, shared, ...) joins by adding to ``STORES`` a function that takes a
scratch directory and returns a zero-argument factory of fresh, empty stores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import outcome
import pytest
import trio
from support.postgres_cluster import Cluster
from support.task_records import record

from presa_trio._backends.postgres import PostgresDatabase
from presa_trio.backends import SqlDatabase, SqliteDatabase
from presa_trio.errors import CapacityExceeded
from presa_trio.ext.tasks import _store
from presa_trio.ext.tasks._sql_store import SqlTaskStore, encode
from presa_trio.ext.tasks._states import (
    CancelRequested,
    Completed,
    InputRequested,
    Status,
    TaskRecord,
    apply,
)
from presa_trio.ext.tasks._store import (
    LeaseStore,
    MemoryTaskStore,
    TaskLimits,
    TaskStore,
    payload_bytes,
)
from presa_trio.ext.tasks.testing import check_lease_store, check_task_store

StoreFactory = Callable[[], TaskStore]


def memory_stores(scratch: Path) -> StoreFactory:
    return MemoryTaskStore


def sqlite_stores(scratch: Path) -> StoreFactory:
    """Each store its own file (a fresh, empty database) in ``scratch``."""
    made = itertools.count()
    return lambda: SqlTaskStore(SqliteDatabase(str(scratch / f"tasks-{next(made)}.db")))


def postgres_stores(scratch: Path, cluster: Cluster) -> StoreFactory:
    """Each store its own fresh database in the run's throwaway cluster."""
    return lambda: SqlTaskStore(PostgresDatabase(cluster.new_database(), timeout=5.0))


STORES: list[Any] = [
    pytest.param(memory_stores, id="memory"),
    pytest.param(sqlite_stores, id="sqlite"),
    pytest.param(postgres_stores, id="postgresql"),
]

T0 = 1_700_000_000_000
UNLIMITED = TaskLimits(max_tasks=None, max_stored_per_principal=None, max_active_per_principal=None)
RESULT: dict[str, Any] = {"content": [{"type": "text", "text": "done"}], "isError": False}


@pytest.fixture(params=STORES)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    if request.param is postgres_stores:
        factory: StoreFactory = postgres_stores(tmp_path, request.getfixturevalue("postgres"))
    else:
        factory = request.param(tmp_path)
    return factory


@pytest.fixture
def store(store_factory: StoreFactory) -> TaskStore:
    return store_factory()


def rec(task_id: str = "t-1", **changes: Any) -> TaskRecord:
    return record(task_id, **changes)


def done(task: TaskRecord) -> TaskRecord:
    return apply(task, Completed(RESULT), T0 + 1)


# ------------------------------------------------------------- create and get


async def test_create_then_get(store: TaskStore) -> None:
    task = rec(status_message="starting")
    await store.create(task, UNLIMITED)
    assert await store.get("t-1") == task
    assert await store.count() == 1


async def test_get_unknown_is_none(store: TaskStore) -> None:
    assert await store.get("nope") is None


async def test_create_existing_id_raises(store: TaskStore) -> None:
    await store.create(rec(), UNLIMITED)
    with pytest.raises(ValueError):
        await store.create(rec(tool="other"), UNLIMITED)
    stored = await store.get("t-1")
    assert stored is not None and stored.tool == "deploy"
    assert await store.count() == 1


async def test_factory_gives_independent_stores(store_factory: StoreFactory) -> None:
    one, two = store_factory(), store_factory()
    await one.create(rec(), UNLIMITED)
    assert await two.get("t-1") is None
    assert await two.count() == 0


# ------------------------------------------------------------ compare_and_set


async def test_cas_with_current_revision(store: TaskStore) -> None:
    await store.create(rec(), UNLIMITED)
    new = apply(rec(), InputRequested({"a": {"method": "x"}}), T0 + 5)
    assert await store.compare_and_set(new, 0) is True
    assert await store.get("t-1") == new
    newer = done(new)
    assert await store.compare_and_set(newer, 1) is True
    assert await store.get("t-1") == newer


async def test_cas_with_stale_revision_fails(store: TaskStore) -> None:
    first = rec()
    await store.create(first, UNLIMITED)
    assert await store.compare_and_set(apply(first, CancelRequested(), T0 + 1), 0) is True
    assert await store.compare_and_set(done(first), 0) is False
    stored = await store.get("t-1")
    assert stored is not None and stored.status is Status.CANCELLED and stored.revision == 1


@pytest.mark.parametrize("expected_revision", [1, -1, 99])
async def test_cas_with_wrong_revision_fails(store: TaskStore, expected_revision: int) -> None:
    await store.create(rec(), UNLIMITED)
    assert await store.compare_and_set(done(rec()), expected_revision) is False
    assert await store.get("t-1") == rec()


async def test_cas_unknown_id_fails_and_stores_nothing(store: TaskStore) -> None:
    assert await store.compare_and_set(rec("ghost"), 0) is False
    assert await store.get("ghost") is None
    assert await store.count() == 0


# ------------------------------------------------------------------- max_tasks


@pytest.mark.parametrize("n", [1, 3])
async def test_max_tasks_refuses_the_next_create(store: TaskStore, n: int) -> None:
    limits = TaskLimits(max_tasks=n, max_stored_per_principal=None, max_active_per_principal=None)
    for i in range(n):
        await store.create(rec(f"t{i}", principal=f"s{i}"), limits)
    with pytest.raises(CapacityExceeded) as caught:
        await store.create(rec("extra", principal="elsewhere"), limits)
    assert caught.value.limit == "max_tasks"
    assert await store.get("extra") is None
    assert await store.count() == n


async def test_max_tasks_counts_terminal_records_too(store: TaskStore) -> None:
    limits = TaskLimits(max_tasks=1, max_stored_per_principal=None, max_active_per_principal=None)
    await store.create(rec(), limits)
    assert await store.compare_and_set(done(rec()), 0) is True
    with pytest.raises(CapacityExceeded) as caught:
        await store.create(rec("t-2"), limits)
    assert caught.value.limit == "max_tasks"


async def test_max_tasks_frees_after_delete_expired(store: TaskStore) -> None:
    limits = TaskLimits(max_tasks=1, max_stored_per_principal=None, max_active_per_principal=None)
    await store.create(rec(ttl_ms=10), limits)
    assert await store.delete_expired(T0 + 10) == 1
    await store.create(rec("t-2"), limits)
    assert await store.count() == 1


# -------------------------------------------------------- max_active_per_principal

PER_PRINCIPAL = TaskLimits(
    max_tasks=None, max_stored_per_principal=None, max_active_per_principal=2
)


async def fill_scope(store: TaskStore, principal: str = "s") -> None:
    await store.create(rec(f"{principal}-1", principal=principal, ttl_ms=10), PER_PRINCIPAL)
    await store.create(rec(f"{principal}-2", principal=principal), PER_PRINCIPAL)


async def refused_in(store: TaskStore, task_id: str, principal: str = "s") -> None:
    with pytest.raises(CapacityExceeded) as caught:
        await store.create(rec(task_id, principal=principal), PER_PRINCIPAL)
    assert caught.value.limit == "max_active_tasks_per_principal"
    assert await store.get(task_id) is None


async def test_per_scope_refuses_the_next_active_task(store: TaskStore) -> None:
    await fill_scope(store)
    await refused_in(store, "s-3")
    assert await store.count() == 2


async def test_per_scope_leaves_other_scopes_alone(store: TaskStore) -> None:
    await fill_scope(store, "s")
    await store.create(rec("o-1", principal="other"), PER_PRINCIPAL)
    await store.create(rec("o-2", principal="other"), PER_PRINCIPAL)
    await refused_in(store, "o-3", principal="other")
    assert await store.count() == 4


@pytest.mark.parametrize(
    "event", [Completed(RESULT), CancelRequested()], ids=["completed", "cancelled"]
)
async def test_terminal_via_cas_frees_a_slot(store: TaskStore, event: Any) -> None:
    await fill_scope(store)
    first = await store.get("s-1")
    assert first is not None
    assert await store.compare_and_set(apply(first, event, T0 + 1), 0) is True
    await store.create(rec("s-3"), PER_PRINCIPAL)
    await refused_in(store, "s-4")


async def test_non_terminal_cas_keeps_the_slot(store: TaskStore) -> None:
    await fill_scope(store)
    waiting = apply(rec("s-1", ttl_ms=10), InputRequested({"a": {"method": "x"}}), T0 + 1)
    assert await store.compare_and_set(waiting, 0) is True
    await refused_in(store, "s-3")


async def test_terminal_cas_twice_frees_only_one_slot(store: TaskStore) -> None:
    await fill_scope(store)
    completed = done(rec("s-1", ttl_ms=10))
    assert await store.compare_and_set(completed, 0) is True
    assert await store.compare_and_set(replace(completed, revision=2), 1) is True
    await store.create(rec("s-3"), PER_PRINCIPAL)
    await refused_in(store, "s-4")


async def test_deleting_expired_active_task_frees_its_slot(store: TaskStore) -> None:
    await fill_scope(store)
    assert await store.delete_expired(T0 + 10) == 1
    await store.create(rec("s-3"), PER_PRINCIPAL)
    await refused_in(store, "s-4")


async def test_deleting_expired_terminal_task_frees_nothing_more(store: TaskStore) -> None:
    await fill_scope(store)
    assert await store.compare_and_set(done(rec("s-1", ttl_ms=10)), 0) is True
    await store.create(rec("s-3"), PER_PRINCIPAL)
    assert await store.delete_expired(T0 + 10) == 1
    await refused_in(store, "s-4")


async def test_terminal_records_do_not_count_as_active(store: TaskStore) -> None:
    # "counts only non-terminal tasks of the same principal": a record stored already terminal
    # (e.g. restored or imported) must not take an active slot.
    limits = TaskLimits(max_tasks=None, max_stored_per_principal=None, max_active_per_principal=1)
    await store.create(done(rec("old")), limits)
    await store.create(rec("new"), limits)
    assert await store.count() == 2


async def test_max_tasks_is_checked_with_per_scope_limit(store: TaskStore) -> None:
    limits = TaskLimits(max_tasks=2, max_stored_per_principal=None, max_active_per_principal=2)
    await store.create(rec("a", principal="x"), limits)
    await store.create(rec("b", principal="y"), limits)
    with pytest.raises(CapacityExceeded) as caught:
        await store.create(rec("c", principal="z"), limits)
    assert caught.value.limit == "max_tasks"


# ------------------------------------------------------------ max_stored_bytes


def bytes_only(most: int, reserve: int = 0) -> TaskLimits:
    return TaskLimits(
        max_tasks=None,
        max_stored_per_principal=None,
        max_active_per_principal=None,
        max_stored_bytes=most,
        active_task_reserve_bytes=reserve,
    )


def result_of(size: int) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "x" * size}], "isError": False}


def test_the_byte_bound_counts_the_payloads_as_the_wire_writes_them() -> None:
    asked = apply(rec(), InputRequested({"k": {"method": "roots/list"}}), T0 + 1)
    assert payload_bytes(rec()) == 0
    assert payload_bytes(asked) == len(b'{"k":{"method":"roots/list"}}')
    finished = apply(asked, Completed(result_of(100)), T0 + 2)  # the questions are dropped
    assert payload_bytes(finished) == len(json.dumps(result_of(100), separators=(",", ":")))
    failed = apply(asked, CancelRequested(), T0 + 2)
    assert payload_bytes(failed) == 0
    odd = replace(rec(), input_requests={"k": {"at": float("nan")}})  # not JSON: still counted
    assert payload_bytes(odd) > 0


def test_the_byte_bound_reserves_room_for_every_running_task() -> None:
    limits = bytes_only(1_000, reserve=300)
    assert limits.refusal(0, 0, 0, stored_bytes=100, active=2) is None  # 100 + 3 * 300
    assert limits.refusal(0, 0, 0, stored_bytes=101, active=2) == "max_stored_bytes"
    assert limits.refusal(0, 0, 0, stored_bytes=1_000, active=3) == "max_stored_bytes"
    assert limits.refusal(0, 0, 0, stored_bytes=None, active=10**6) is None  # not counted
    assert replace(limits, max_stored_bytes=None).refusal(0, 0, 0, stored_bytes=10**12) is None
    assert TaskLimits().max_stored_bytes == 256 * 1024 * 1024


async def test_the_memory_store_keeps_the_byte_bound() -> None:
    store = MemoryTaskStore()
    limits = bytes_only(1_000, reserve=200)
    await store.create(rec("a"), limits)
    await store.create(rec("b"), limits)
    assert store.stored_bytes == 0
    a = await store.get("a")
    assert a is not None
    finished = apply(a, Completed(result_of(500)), T0 + 1)
    size = payload_bytes(finished)
    assert 1_000 - 3 * 200 < size <= 1_000 - 2 * 200
    assert await store.compare_and_set(finished, a.revision)
    assert store.stored_bytes == size
    await store.create(rec("c"), limits)  # one result, and the reserves of "b" and "c"
    with pytest.raises(CapacityExceeded) as caught:  # ... and of "d": past 1,000
        await store.create(rec("d"), limits)
    assert caught.value.limit == "max_stored_bytes" and await store.get("d") is None
    b = await store.get("b")
    assert b is not None
    assert await store.compare_and_set(apply(b, CancelRequested(), T0 + 1), b.revision)
    await store.create(rec("d"), limits)  # a task that ended gave its reserve back
    assert await store.delete_expired(T0 + 60_000) == 4
    assert store.stored_bytes == 0


async def test_the_memory_store_measures_a_record_only_when_a_payload_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measured: list[str] = []
    measure = _store.payload_bytes

    def counting(task: TaskRecord) -> int:
        measured.append(task.task_id)
        return measure(task)

    monkeypatch.setattr(_store, "payload_bytes", counting)
    store = MemoryTaskStore()
    task = rec()
    await store.create(task, UNLIMITED)
    assert measured == ["t-1"]
    moved = replace(task, status_message="step 2", revision=1)  # no payload replaced
    assert await store.compare_and_set(moved, 0)
    for _ in range(3):
        await store.get("t-1")  # a tasks/get measures nothing
    assert measured == ["t-1"]
    assert await store.compare_and_set(apply(moved, Completed(RESULT), T0 + 1), 1)
    assert measured == ["t-1", "t-1"]


@pytest.mark.parametrize("make", [sqlite_stores], ids=["sqlite"])
async def test_a_store_on_a_database_does_not_apply_the_byte_bound(
    make: Callable[[Path], StoreFactory], tmp_path: Path
) -> None:
    """Its records are on disk: ``TaskLimits.max_stored_bytes`` bounds the process's memory."""
    store = make(tmp_path)()
    for n in range(3):
        await store.create(rec(f"t{n}"), bytes_only(1, reserve=1_000))
    assert await store.count() == 3


def traced_statements(database: SqliteDatabase) -> list[str]:
    """Every SQL statement ``database`` runs from now on, in order (its writes run through
    ``run`` too)."""
    statements: list[str] = []
    run = database.run

    async def traced(fn: Callable[[Any], Any]) -> Any:
        def tracing(conn: Any) -> Any:
            conn.set_trace_callback(statements.append)
            try:
                return fn(conn)
            finally:
                conn.set_trace_callback(None)

        return await run(tracing)

    database.run = traced  # type: ignore[method-assign]
    return statements


async def test_sqlite_creation_reads_other_tasks_through_the_index(tmp_path: Path) -> None:
    """Creating a task counts for the limits inside the store's one serialised write: every
    statement it runs finds tasks through an index, and the one whole-table read is of the
    one-row total. One statement summing over every row made each creation cost a pass over
    the store, and so, more slowly, did a bare ``COUNT(*)`` of the total."""
    path = tmp_path / "tasks.db"
    database = SqliteDatabase(str(path))
    store = SqlTaskStore(database)
    await store.create(rec("first"), PER_PRINCIPAL)  # the tables exist
    statements = traced_statements(database)
    await store.create(rec("second"), PER_PRINCIPAL)
    database.close()
    selects = [s for s in statements if s.startswith("SELECT")]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        # (id, parent, detail) of each step of each statement's plan
        plans = {
            s: [(r[0], r[1], r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {s}")]
            for s in selects
        }
    reads = []  # each step that reads the table: (what it does, what it is part of)
    for steps in plans.values():
        details = {step: detail for step, _, detail in steps}
        for _, parent, detail in steps:
            if detail.startswith(("SEARCH", "SCAN")):
                reads.append((" ".join(detail.split()[:2]), details.get(parent, "")))
    whole_table = [read for read in reads if read[0].startswith("SCAN")]
    assert whole_table == [("SCAN presa_task_total", "SCALAR SUBQUERY 1")], plans
    assert len(reads) == 3, plans  # the total, the principal's count, the id's check
    assert await SqlTaskStore(SqliteDatabase(str(path))).count() == 2


async def test_sqlite_compare_and_set_is_one_statement_outside_the_serialised_writes(
    tmp_path: Path,
) -> None:
    """A task's state change is one ``UPDATE`` in its own transaction: it waits behind no
    other worker's write lock (on PostgreSQL: no ``BEGIN``, lock and ``COMMIT`` round trips
    around it). It counts nothing, so the limits do not need it serialised."""
    database = SqliteDatabase(str(tmp_path / "tasks.db"))
    store = SqlTaskStore(database)
    first = rec("t")
    await store.create(first, UNLIMITED)
    statements = traced_statements(database)
    done = apply(first, Completed(RESULT), T0 + 1)
    assert await store.compare_and_set(done, first.revision)
    assert not await store.compare_and_set(done, first.revision)  # stale: nothing changes
    # a serialised write would show as BEGIN IMMEDIATE, UPDATE, COMMIT
    assert [s.split()[0] for s in statements] == ["UPDATE", "UPDATE"]
    assert await store.get("t") == done
    database.close()


# ------------------------------------------------------ the SQL stores' total


@pytest.fixture(params=["sqlite", "postgresql"])
async def sql_databases(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], SqlDatabase]]:
    """Handles on one fresh database, as many as asked for (each as another worker's)."""
    make: Callable[[], SqlDatabase]
    if request.param == "sqlite":
        make = functools.partial(SqliteDatabase, str(tmp_path / "tasks.db"))
    else:
        url = request.getfixturevalue("postgres").new_database()
        make = functools.partial(PostgresDatabase, url, timeout=5.0)
    made: list[SqlDatabase] = []

    def handle() -> SqlDatabase:
        made.append(make())
        return made[-1]

    yield handle
    for database in made:
        await database.aclose()


async def stored_total(database: SqlDatabase) -> list[int]:
    """The total's row (one, whatever the number of stores that opened the database)."""
    rows = await database.run(
        lambda conn: conn.execute("SELECT total FROM presa_task_total").fetchall()
    )
    return [int(row[0]) for row in rows]


ONLY_TOTAL = TaskLimits(max_tasks=4, max_stored_per_principal=None, max_active_per_principal=None)


async def test_sql_total_starts_from_the_tasks_a_database_holds(
    sql_databases: Callable[[], SqlDatabase],
) -> None:
    """A database an older presa_trio wrote holds tasks and no total: the first store to
    open it counts them, and the second counts nothing again."""
    older = SqlTaskStore(sql_databases())
    for n in range(3):
        await older.create(rec(f"old-{n}"), UNLIMITED)
    database = sql_databases()
    await database.write(lambda conn: conn.execute("DROP TABLE presa_task_total"))
    one, two = SqlTaskStore(database), SqlTaskStore(sql_databases())
    await one.create(rec("new-1"), ONLY_TOTAL)
    assert await two.get("new-1") is not None  # the second store has opened it too
    with pytest.raises(CapacityExceeded) as caught:
        await two.create(rec("new-2"), ONLY_TOTAL)
    assert caught.value.limit == "max_tasks"
    assert await stored_total(database) == [4]
    assert await one.count() == 4


async def test_sql_total_is_counted_afresh_by_each_sweep(
    sql_databases: Callable[[], SqlDatabase],
) -> None:
    """Tasks written past the store (by an older presa_trio, during an upgrade) leave its
    total short; the next sweep counts the table again, and the limit holds after it."""
    database = sql_databases()
    store = SqlTaskStore(database)
    await store.create(rec("mine"), ONLY_TOTAL)
    for task in (rec("past-1"), rec("past-2")):
        row = (task.task_id, task.principal, "", 0, 0, None, encode(task))
        await database.write(
            lambda conn, row=row: conn.execute(
                "INSERT INTO presa_tasks VALUES (?, ?, ?, ?, ?, ?, ?)", row
            )
        )
    assert await stored_total(database) == [1]
    assert await store.delete_expired(T0) == 0  # nothing has expired
    assert await stored_total(database) == [3]
    await store.create(rec("fourth"), ONLY_TOTAL)
    with pytest.raises(CapacityExceeded) as caught:
        await store.create(rec("fifth"), ONLY_TOTAL)
    assert caught.value.limit == "max_tasks"


async def test_sql_total_follows_creations_refusals_and_sweeps(
    sql_databases: Callable[[], SqlDatabase],
) -> None:
    database = sql_databases()
    store = SqlTaskStore(database)
    two_each = TaskLimits(max_tasks=None, max_stored_per_principal=2, max_active_per_principal=None)
    await store.create(rec("a", ttl_ms=100), two_each)
    await store.create(rec("b"), two_each)
    with pytest.raises(CapacityExceeded):
        await store.create(rec("c"), two_each)
    with pytest.raises(ValueError):
        await store.create(rec("a"), UNLIMITED)
    assert await stored_total(database) == [2]
    assert await store.delete_expired(T0 + 100) == 1
    assert await stored_total(database) == [1]
    assert await store.count() == 1


# -------------------------------------------------------------- delete_expired


async def test_delete_expired_deletes_exactly_the_expired(store: TaskStore) -> None:
    tasks = [
        rec("gone-early", ttl_ms=100),
        rec("gone-boundary", ttl_ms=500),
        rec("gone-done", ttl_ms=200),
        rec("kept-young", ttl_ms=501),
        rec("kept-forever", ttl_ms=None),
        rec("kept-late-start", created_ms=T0 + 400, ttl_ms=200),
    ]
    for task in tasks:
        await store.create(task, UNLIMITED)
    assert await store.compare_and_set(done(tasks[2]), 0) is True
    assert await store.delete_expired(T0 + 500) == 3
    assert await store.count() == 3
    for task in tasks:
        stored = await store.get(task.task_id)
        assert (stored is None) is task.task_id.startswith("gone")
    assert await store.delete_expired(T0 + 500) == 0


async def test_delete_expired_on_empty_store(store: TaskStore) -> None:
    assert await store.delete_expired(T0) == 0


async def test_get_returns_expired_records_until_deleted(store: TaskStore) -> None:
    await store.create(rec(ttl_ms=1), UNLIMITED)
    assert await store.get("t-1") == rec(ttl_ms=1)


async def test_count_follows_creates_and_deletes(store: TaskStore) -> None:
    assert await store.count() == 0
    for i in range(4):
        await store.create(rec(f"t{i}", ttl_ms=100 * (i + 1)), UNLIMITED)
        assert await store.count() == i + 1
    assert await store.delete_expired(T0 + 200) == 2
    assert await store.count() == 2


# ------------------------------------------------------------ records are data


def plain(value: Any) -> bool:
    """JSON-able data, allowing the set types a record uses for its key sets."""
    if type(value).__module__.split(".")[0] == "trio":
        return False
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return all(plain(v) for v in value)
    return False


async def test_records_are_plain_data(store: TaskStore) -> None:
    task = rec(status_message="hi")
    await store.create(task, UNLIMITED)
    waiting = apply(task, InputRequested({"a": {"method": "x", "params": {"n": 1}}}), T0 + 1)
    assert await store.compare_and_set(waiting, 0) is True
    for stored in [await store.get("t-1"), done(waiting)]:
        assert stored is not None
        as_dict = dataclasses.asdict(stored)
        assert TaskRecord(**as_dict) == stored
        assert plain(as_dict)
        json.dumps({k: v for k, v in as_dict.items() if k != "used_keys"})
        assert sorted(as_dict["used_keys"]) == ["a"]


async def test_check_task_store_passes(store_factory: StoreFactory) -> None:
    """The shipped contract checker (``presa_trio.ext.tasks.testing``) agrees with this suite."""
    await check_task_store(lambda: contextlib.nullcontext(store_factory()))


class LoseyStore:
    """A broken store: compare-and-set ignores the revision (last writer wins)."""

    def __init__(self) -> None:
        self.inner = MemoryTaskStore()

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        await self.inner.create(task, limits)

    async def get(self, task_id: str) -> TaskRecord | None:
        return await self.inner.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        current = await self.inner.get(task.task_id)
        if current is None:
            return False
        return await self.inner.compare_and_set(task, current.revision)

    async def delete_expired(self, now_ms: int) -> int:
        return await self.inner.delete_expired(now_ms)

    async def count(self) -> int:
        return await self.inner.count()


class LazyStore(LoseyStore):
    """A broken store: ``get`` answers even when its caller is cancelled."""

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        return await self.inner.compare_and_set(task, expected_revision)

    async def get(self, task_id: str) -> TaskRecord | None:
        return self.inner._tasks.get(task_id)


class HastyStore(LoseyStore):
    """A broken store: ``compare_and_set`` checks for cancellation but never yields."""

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        await trio.lowlevel.checkpoint_if_cancelled()
        step = self.inner.compare_and_set(task, expected_revision)
        step.send(None)  # the memory store's one checkpoint, answered here instead of by trio
        try:
            step.send(outcome.Value(None))
        except StopIteration as done:
            return bool(done.value)
        raise AssertionError("the memory store's compare_and_set yielded twice")


@pytest.mark.parametrize(
    ("broken", "rule"),
    [(LoseyStore, "compare_and_set"), (LazyStore, "checkpoints"), (HastyStore, "checkpoints")],
)
async def test_check_task_store_catches_a_broken_store(broken: Any, rule: str) -> None:
    with pytest.raises(AssertionError, match=f"^{rule}: "):
        await check_task_store(lambda: contextlib.nullcontext(broken()))


# ------------------------------------------------------------------ leases


@pytest.mark.parametrize("stores", [sqlite_stores, postgres_stores], ids=["sqlite", "postgresql"])
async def test_check_lease_store_passes(
    stores: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The stores on a database keep leases, as ``check_lease_store`` checks them."""
    if stores is postgres_stores:
        factory: StoreFactory = stores(tmp_path, request.getfixturevalue("postgres"))
    else:
        factory = stores(tmp_path)

    def opened() -> contextlib.nullcontext[LeaseStore]:
        store = factory()
        assert isinstance(store, LeaseStore)  # what TasksExtension checks
        return contextlib.nullcontext(store)

    await check_lease_store(opened)


def test_the_memory_store_keeps_no_leases() -> None:
    """One process's memory dies with its worker: there is no one left to fail its tasks."""
    assert not isinstance(MemoryTaskStore(), LeaseStore)


class LeasingStore(LoseyStore):
    """A correct store that keeps leases, on the memory store (its ``compare_and_set`` is
    the memory store's own)."""

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        return await self.inner.compare_and_set(task, expected_revision)

    def unfinished(self) -> list[TaskRecord]:
        return [task for task in self.inner._tasks.values() if not task.terminal]

    async def owners(self) -> frozenset[str]:
        await trio.lowlevel.checkpoint_if_cancelled()
        return frozenset(task.owner for task in self.unfinished())

    async def orphans(self, lost: frozenset[str]) -> list[str]:
        await trio.lowlevel.checkpoint_if_cancelled()
        return [task.task_id for task in self.unfinished() if task.owner in lost]


class OwnsTheFinished(LeasingStore):
    """A broken store: a worker whose tasks all ended still counts as an owner."""

    async def owners(self) -> frozenset[str]:
        await trio.lowlevel.checkpoint_if_cancelled()
        return frozenset(task.owner for task in self.inner._tasks.values())


class OrphansTheFinished(LeasingStore):
    """A broken store: a lost worker's finished tasks come back as orphans too."""

    async def orphans(self, lost: frozenset[str]) -> list[str]:
        await trio.lowlevel.checkpoint_if_cancelled()
        return [task.task_id for task in self.inner._tasks.values() if task.owner in lost]


class DeafOwners(LeasingStore):
    """A broken store: ``owners`` answers even when its caller is cancelled."""

    async def owners(self) -> frozenset[str]:
        return frozenset(task.owner for task in self.unfinished())


async def test_check_lease_store_passes_a_store_that_keeps_the_contract() -> None:
    await check_task_store(lambda: contextlib.nullcontext(LeasingStore()))
    await check_lease_store(lambda: contextlib.nullcontext(LeasingStore()))


@pytest.mark.parametrize(
    ("broken", "rule"),
    [(OwnsTheFinished, "owners"), (OrphansTheFinished, "orphans"), (DeafOwners, "lease_reads")],
)
async def test_check_lease_store_catches_a_broken_store(broken: Any, rule: str) -> None:
    with pytest.raises(AssertionError, match=f"^{rule}: "):
        await check_lease_store(lambda: contextlib.nullcontext(broken()))
