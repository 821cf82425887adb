"""The PostgreSQL writer and reader of an open backend (``PostgresDatabase.serve``): the
writes queued together commit in one transaction, each still all or nothing (a write that
raises, or whose statement fails, is rolled back to its savepoint alone); reads go to a
connection of their own in batches; a write withdrawn while queued never runs; a connection
the database has closed is replaced before a batch uses it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio._backends.postgres import LANES, PostgresDatabase
from presa_trio._backends.sql import StorageUnavailable
from presa_trio._backends.tally import Tally
from presa_trio.backends import SharedBackend, open_backend
from tests.support.postgres_cluster import Cluster

WRITES = 20


def database(backend: Any) -> PostgresDatabase:
    assert isinstance(backend, SharedBackend)
    db = backend.db
    assert isinstance(db, PostgresDatabase)
    return db


def fresh_url(postgres: Cluster) -> str:
    return postgres.new_database()


async def rows(db: PostgresDatabase) -> list[int]:
    def select(conn: Any) -> list[int]:
        return [row[0] for row in conn.execute("SELECT n FROM t ORDER BY n").fetchall()]

    return await db.run(select)


async def make_table(db: PostgresDatabase) -> None:
    await db.write(lambda conn: conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))


@pytest.mark.parametrize("pipelined", [True, False], ids=["pipelined", "one by one"])
@pytest.mark.parametrize("failing", ["first", "middle", "last"])
@pytest.mark.parametrize("how", ["raises", "duplicate key"])
async def test_concurrent_writes_commit_together_and_a_failing_one_alone_is_undone(
    postgres: Cluster, failing: str, how: str, pipelined: bool
) -> None:
    async with open_backend(fresh_url(postgres)) as backend:
        db = database(backend)
        db._pipelined = pipelined  # without libpq 14, statements wait for their answers
        await make_table(db)
        tally = db.tally = Tally()
        bad = {"first": 0, "middle": WRITES // 2, "last": WRITES - 1}[failing]
        outcomes: dict[int, str] = {}

        async def insert(n: int) -> None:
            def write(conn: Any) -> None:
                conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
                if n == bad and how == "raises":
                    raise ValueError("fails after its insert")
                if n == bad:
                    conn.execute("INSERT INTO t (n) VALUES (?)", (n,))

            try:
                await db.write(write)
            except ValueError:
                outcomes[n] = "raised"
            except Exception as exc:
                outcomes[n] = type(exc).__name__
            else:
                outcomes[n] = "written"

        async with trio.open_nursery() as nursery:
            for n in range(WRITES):
                nursery.start_soon(insert, n)

        failure = "raised" if how == "raises" else "UniqueViolation"
        assert outcomes == {n: failure if n == bad else "written" for n in range(WRITES)}
        assert await rows(db) == [n for n in range(WRITES) if n != bad]
        counts = tally.counts()
        assert counts["writes"] == WRITES
        assert 0 < counts["batches"] < WRITES  # together: fewer thread hops than writes


async def test_a_write_withdrawn_while_queued_never_runs(postgres: Cluster) -> None:
    async with open_backend(fresh_url(postgres)) as backend:
        db = database(backend)
        await make_table(db)
        release = threading.Event()
        withdrawn = trio.CancelScope()

        async def queued() -> None:
            with withdrawn:
                await db.write(lambda conn: conn.execute("INSERT INTO t (n) VALUES (2)"))

        async with trio.open_nursery() as nursery:
            # every lane of the writer is busy until released (the first write holds the
            # write lock, the others wait for it)
            for _ in range(LANES):
                nursery.start_soon(db.write, lambda conn: release.wait(10))
                await trio.testing.wait_all_tasks_blocked()  # a batch of its own
            nursery.start_soon(queued)
            await trio.testing.wait_all_tasks_blocked()
            withdrawn.cancel()
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert withdrawn.cancelled_caught
        await db.write(lambda conn: conn.execute("INSERT INTO t (n) VALUES (3)"))
        assert await rows(db) == [3]


async def test_reads_go_together_and_one_that_fails_fails_alone(postgres: Cluster) -> None:
    """``SELECT``s queued together are sent at once; when one fails, the others are read
    again alone and answered, and only it fails."""
    async with open_backend(fresh_url(postgres)) as backend:
        db = database(backend)
        await make_table(db)
        await db.write(lambda conn: conn.execute("INSERT INTO t (n) VALUES (1)"))
        tally = db.tally = Tally()
        release = threading.Event()
        read: list[Any] = []

        async def reader(n: int) -> None:
            table = "missing" if n == 3 else "t"
            try:
                read.append([row[0] for row in await db.select(f"SELECT n FROM {table}")])
            except Exception as exc:
                read.append(type(exc).__name__)

        async with trio.open_nursery() as nursery:
            # the writer's thread holds a write (uncommitted) until it is released
            def held(conn: Any) -> None:
                conn.execute("INSERT INTO t (n) VALUES (2)")
                release.wait(10)

            nursery.start_soon(db.write, held)
            await trio.testing.wait_all_tasks_blocked()
            with trio.fail_after(5):  # reads answered while the write is held
                async with trio.open_nursery() as readers:
                    for n in range(WRITES):
                        readers.start_soon(reader, n)
            release.set()
        assert sorted(map(str, read)) == sorted(["UndefinedTable"] + ["[1]"] * (WRITES - 1))
        counts = tally.counts()
        assert counts["calls"] == WRITES + 1  # the reads and the write
        assert 1 < counts["batches"] < WRITES + 1  # the reads together, the write apart
        assert await rows(db) == [1, 2]


async def test_a_one_statement_write_is_committed_by_the_updater_never_behind_a_write(
    postgres: Cluster,
) -> None:
    """``update`` (a task's change, its completion) is committed by the updater, in a batch
    of its own: it does not wait while a write holds the write lock."""
    async with open_backend(fresh_url(postgres)) as backend:
        db = database(backend)
        await make_table(db)
        release = threading.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(db.write, lambda conn: release.wait(10))
            await trio.testing.wait_all_tasks_blocked()
            with trio.fail_after(5):
                await db.update(lambda conn: conn.execute("INSERT INTO t (n) VALUES (6)"))
            assert not release.is_set()
            release.set()
        await db.write(lambda conn: conn.execute("DELETE FROM t"))
        tally = db.tally = Tally()
        changed = await db.update(lambda conn: conn.execute("INSERT INTO t (n) VALUES (5)"))
        assert changed == 1
        counts = tally.counts()
        assert (counts["calls"], counts["writes"], counts["batches"]) == (1, 0, 1)
        assert await rows(db) == [5]


async def test_connections_the_database_closed_are_replaced_before_a_batch(
    postgres: Cluster,
) -> None:
    async with open_backend(fresh_url(postgres)) as backend:
        db = database(backend)
        await make_table(db)
        assert await db.read(lambda conn: conn.execute("SELECT 1").fetchone()[0]) == 1

        def terminate_the_others(conn: Any) -> int:
            return len(conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database()"
            ).fetchall())  # fmt: skip

        assert await db.run(terminate_the_others) >= 2  # the writer's and the reader's
        await trio.sleep(0.2)  # the database's goodbye reaches the closed connections
        await db.write(lambda conn: conn.execute("INSERT INTO t (n) VALUES (9)"))
        assert await db.read(lambda conn: conn.execute("SELECT n FROM t").fetchall()) == [(9,)]


async def test_a_lost_database_fails_the_batch_as_retryable(postgres: Cluster) -> None:
    async with open_backend(fresh_url(postgres)) as backend:
        db = database(backend)
        await make_table(db)

        def dies(conn: Any) -> None:
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

        with pytest.raises(StorageUnavailable):
            await db.write(dies)
        await db.write(lambda conn: conn.execute("INSERT INTO t (n) VALUES (4)"))
        assert await rows(db) == [4]


async def test_updates_in_one_batch_each_get_their_own_count_of_rows(postgres: Cluster) -> None:
    """A batch's one-statement writes (compare-and-set) are answered together, at its end:
    each still gets the rows its own statement changed."""
    async with open_backend(postgres.new_database()) as backend:
        db = database(backend)
        await make_table(db)
        await db.write(lambda conn: conn.execute(
            "INSERT INTO t (n) SELECT generate_series(0, ?, 2)", (WRITES,)))  # fmt: skip
        tally = db.tally = Tally()
        changed: dict[int, int] = {}

        async def touch(n: int) -> None:
            changed[n] = await db.update(
                lambda conn: conn.execute("UPDATE t SET n = n WHERE n = ?", (n,))
            )

        async with trio.open_nursery() as nursery:
            for n in range(WRITES):
                nursery.start_soon(touch, n)
        assert changed == {n: 1 if n % 2 == 0 else 0 for n in range(WRITES)}
        assert 0 < tally.counts()["batches"] < WRITES


async def test_selects_queued_together_are_answered_together_each_with_its_rows(
    postgres: Cluster,
) -> None:
    async with open_backend(postgres.new_database()) as backend:
        db = database(backend)
        await make_table(db)
        await db.write(lambda conn: conn.execute(
            "INSERT INTO t (n) SELECT generate_series(0, ?)", (WRITES,)))  # fmt: skip
        tally = db.tally = Tally()
        release = threading.Event()
        found: dict[int, list[Any]] = {}

        async def select(n: int) -> None:
            query = "SELECT n, n * 2 FROM t WHERE n >= ? ORDER BY n LIMIT 2"
            found[n] = await db.select(query, (n,))

        async with trio.open_nursery() as nursery:
            # every lane of the reader is busy until released: the selects queue behind
            for _ in range(LANES):
                nursery.start_soon(db.read, lambda conn: release.wait(10))
                await trio.testing.wait_all_tasks_blocked()  # a batch of its own
            for n in range(WRITES):
                nursery.start_soon(select, n)
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert found == {n: [(n, 2 * n), (n + 1, 2 * n + 2)] for n in range(WRITES)}
        # the busy reads, then every select at once
        assert tally.counts()["batches"] == LANES + 1
