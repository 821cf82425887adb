"""The SQLite writer of an open backend (``SqliteDatabase.serve``): concurrent writes commit
together, each still all or nothing; a write withdrawn before the writer takes it never runs;
once the writer stops, writes run on their own again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio._backends.sqlite import SqliteDatabase
from presa_trio._backends.tally import Tally
from presa_trio.backends import SharedBackend, open_backend

WRITES = 20


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/state.db?lease=3600"


def database(backend: Any) -> SqliteDatabase:
    assert isinstance(backend, SharedBackend)
    db = backend.db
    assert isinstance(db, SqliteDatabase)
    return db


async def rows(db: SqliteDatabase) -> list[int]:
    def select(conn: Any) -> list[int]:
        return [row[0] for row in conn.execute("SELECT n FROM t ORDER BY n").fetchall()]

    return await db.run(select)


async def test_concurrent_writes_commit_together_and_a_failing_one_alone_is_undone(
    tmp_path: Path,
) -> None:
    async with open_backend(url(tmp_path)) as backend:
        db = database(backend)
        await db.write(lambda conn: conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))
        tally = db.tally = Tally()
        outcomes: dict[int, str] = {}

        async def insert(n: int) -> None:
            def write(conn: Any) -> None:
                conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
                if n == 7:
                    raise ValueError("the seventh fails after its insert")

            try:
                await db.write(write)
            except ValueError:
                outcomes[n] = "failed"
            else:
                outcomes[n] = "written"

        async with trio.open_nursery() as nursery:
            for n in range(WRITES):
                nursery.start_soon(insert, n)

        assert outcomes == {n: "failed" if n == 7 else "written" for n in range(WRITES)}
        assert await rows(db) == [n for n in range(WRITES) if n != 7]
        counts = tally.counts()
        assert counts["writes"] == WRITES
        assert 0 < counts["batches"] < WRITES  # together: fewer thread hops than writes


async def test_a_write_withdrawn_while_queued_never_runs(tmp_path: Path) -> None:
    async with open_backend(url(tmp_path)) as backend:
        db = database(backend)
        await db.write(lambda conn: conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))
        release = threading.Event()
        withdrawn = trio.CancelScope()

        async def queued() -> None:
            with withdrawn:
                await db.write(lambda conn: conn.execute("INSERT INTO t (n) VALUES (2)"))

        async with trio.open_nursery() as nursery:
            # the writer's thread is busy with the first write until it is released
            nursery.start_soon(db.write, lambda conn: release.wait(10))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(queued)
            await trio.testing.wait_all_tasks_blocked()
            withdrawn.cancel()
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert withdrawn.cancelled_caught
        await db.write(lambda conn: conn.execute("INSERT INTO t (n) VALUES (3)"))
        assert await rows(db) == [3]


async def test_after_the_backend_closes_writes_run_on_their_own(tmp_path: Path) -> None:
    async with open_backend(url(tmp_path)) as backend:
        db = database(backend)
        await db.write(lambda conn: conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))
    fresh = SqliteDatabase(str(tmp_path / "state.db"))  # no writer: the direct path
    try:
        await fresh.write(lambda conn: conn.execute("INSERT INTO t (n) VALUES (1)"))
        assert await rows(fresh) == [1]
    finally:
        fresh.close()


@pytest.mark.parametrize("failing", ["first", "last"])
async def test_a_write_that_raises_leaves_the_others_of_its_batch(
    tmp_path: Path, failing: str
) -> None:
    async with open_backend(url(tmp_path)) as backend:
        db = database(backend)
        await db.write(lambda conn: conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))
        bad = 0 if failing == "first" else 4
        failed: list[int] = []

        async def insert(n: int) -> None:
            def write(conn: Any) -> None:
                conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
                if n == bad:
                    conn.execute("INSERT INTO t (n) VALUES (?)", (n,))  # a duplicate key

            try:
                await db.write(write)
            except Exception:
                failed.append(n)

        async with trio.open_nursery() as nursery:
            for n in range(5):
                nursery.start_soon(insert, n)
        assert failed == [bad]
        assert await rows(db) == [n for n in range(5) if n != bad]


async def test_reads_go_together_and_never_wait_for_a_write(tmp_path: Path) -> None:
    async with open_backend(url(tmp_path)) as backend:
        db = database(backend)
        await db.write(lambda conn: conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))
        await db.write(lambda conn: conn.execute("INSERT INTO t (n) VALUES (1)"))
        tally = db.tally = Tally()
        release = threading.Event()
        read: list[list[int]] = []

        async def reader() -> None:
            read.append(await db.read(lambda conn: [r[0] for r in conn.execute("SELECT n FROM t")]))

        async with trio.open_nursery() as nursery:
            # the writer's thread holds a write (uncommitted) until it is released
            def held(conn: Any) -> None:
                conn.execute("INSERT INTO t (n) VALUES (2)")
                release.wait(10)

            nursery.start_soon(db.write, held)
            await trio.testing.wait_all_tasks_blocked()
            with trio.fail_after(5):  # reads answered while the write is held
                async with trio.open_nursery() as readers:
                    for _ in range(WRITES):
                        readers.start_soon(reader)
            assert not release.is_set()
            release.set()
        assert read == [[1]] * WRITES  # none saw the write not yet committed
        counts = tally.counts()
        assert counts["calls"] == WRITES + 1  # the reads and the write
        assert 1 < counts["batches"] < WRITES + 1  # the reads together, the write apart
        assert await rows(db) == [1, 2]


async def test_a_read_withdrawn_while_queued_never_runs(tmp_path: Path) -> None:
    async with open_backend(url(tmp_path)) as backend:
        db = database(backend)
        release = threading.Event()
        ran: list[str] = []
        withdrawn = trio.CancelScope()

        def record(conn: Any) -> None:
            ran.append("queued")

        async def queued() -> None:
            with withdrawn:
                await db.read(record)

        async with trio.open_nursery() as nursery:
            # the reader's thread is busy with the first read until it is released
            nursery.start_soon(db.read, lambda conn: release.wait(10))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(queued)
            await trio.testing.wait_all_tasks_blocked()
            withdrawn.cancel()
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert withdrawn.cancelled_caught
        assert ran == []
        await db.read(record)
        assert ran == ["queued"]


async def test_a_one_statement_write_is_committed_by_the_writer(tmp_path: Path) -> None:
    """``update`` (the task store's compare-and-set: a task's changes, its completion) is
    committed with the writer's other writes, in its thread: no thread hop of its own."""
    async with open_backend(url(tmp_path)) as backend:
        db = database(backend)
        await db.write(lambda conn: conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))
        tally = db.tally = Tally()
        changed = await db.update(lambda conn: conn.execute("INSERT INTO t (n) VALUES (5)"))
        assert changed == 1
        counts = tally.counts()
        # one call, in one batch of the writer (a write transaction's call is ``write``)
        assert (counts["calls"], counts["writes"], counts["batches"]) == (1, 0, 1)
        assert await rows(db) == [5]
