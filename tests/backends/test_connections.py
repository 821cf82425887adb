"""Database connections under trouble: after a restart no statement fails, a pooled connection is
replaced only when the database ended it, writes work without pipeline mode, and a failed write
leaves nothing."""

from __future__ import annotations

import select
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio
import trio.lowlevel
import trio.testing
from support.postgres_cluster import Cluster, running_cluster
from support.stores import task

from presa_trio._backends.postgres import POOL_SIZE, PostgresDatabase
from presa_trio._backends.sqlite import SqliteDatabase
from presa_trio.backends import SqlDatabase, StorageUnavailable
from presa_trio.errors import CapacityExceeded
from presa_trio.ext.tasks._sql_store import SqlTaskStore
from presa_trio.ext.tasks._store import TaskLimits


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_no_statement_fails_after_the_database_restarts(mode: str) -> None:
    """Every connection the pool holds outlives a restart of the database (a cluster of its
    own, stopped and started again): none is lent again, so the first statements after the
    restart work like the rest, each on a new connection."""

    def one(conn: Any) -> Any:
        return conn.execute("SELECT 1").fetchone()

    def slow(conn: Any) -> Any:
        return conn.execute("SELECT pg_sleep(0.1)").fetchone()

    with running_cluster() as cluster:
        db = PostgresDatabase(cluster.new_database(), timeout=5.0)
        await db.open()
        try:
            async with trio.open_nursery() as nursery:  # all of the pool's connections open
                for _ in range(POOL_SIZE):
                    nursery.start_soon(db.run, slow)
            assert db.pool.get_stats()["pool_size"] == POOL_SIZE
            await trio.to_thread.run_sync(cluster.stop, mode)
            await trio.to_thread.run_sync(cluster.start)
            for _ in range(2 * POOL_SIZE):
                assert await db.run(one) == (1,)
        finally:
            await db.aclose()


async def test_a_pooled_connection_is_replaced_only_when_the_database_ended_it(
    postgres: Cluster,
) -> None:
    """A connection with something to read is not taken for closed on sight: one that was
    sent a notification is still lent (it answers the check), one whose server process was
    terminated is replaced, and no statement fails either way."""

    def backend_pid(conn: Any) -> int:
        return int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])

    url = postgres.new_database()
    db = PostgresDatabase(url, timeout=5.0, pool_size=1)
    await db.open()
    try:
        await db.run(lambda conn: conn.execute("LISTEN presa_test"))
        first = await db.run(backend_pid)
        with psycopg.connect(url, autocommit=True) as other:
            other.execute("NOTIFY presa_test")
            await until_the_pooled_connection_has_something_to_read(db)
            assert await db.run(backend_pid) == first
            other.execute("SELECT pg_terminate_backend(%s)", (first,))
        await until_the_pooled_connection_has_something_to_read(db)  # why it ends
        assert await db.run(backend_pid) not in (first, 0)
    finally:
        await db.aclose()


async def until_the_pooled_connection_has_something_to_read(db: PostgresDatabase) -> None:
    """Wait (bounded) until the pool's one idle connection has something from the database
    to read: what was sent has arrived, however slow the machine."""

    def wait() -> bool:
        conn = db.pool.getconn(5.0)
        try:
            return bool(select.select([conn.fileno()], [], [], 30)[0])
        finally:
            db.pool.putconn(conn)

    assert await trio.to_thread.run_sync(wait), "nothing arrived within 30 s"


async def test_postgresql_writes_without_pipeline_mode(
    postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a libpq too old for pipeline mode, a write waits for each statement's answer
    and works the same: limits, row counts and a rolled-back failure."""

    def too_old(*args: Any) -> Any:
        raise psycopg.NotSupportedError("libpq too old for pipeline mode")

    monkeypatch.setattr(psycopg.Pipeline, "is_supported", classmethod(lambda cls: False))
    monkeypatch.setattr(psycopg.Connection, "pipeline", too_old)  # as such a libpq does
    db = PostgresDatabase(postgres.new_database(), timeout=5.0, pool_size=1)
    try:
        assert not db._pipelined
        store = SqlTaskStore(db)
        one = TaskLimits(max_tasks=1, max_stored_per_principal=None, max_active_per_principal=None)
        await store.create(task("t1", "w"), one)
        with pytest.raises(CapacityExceeded):
            await store.create(task("t2", "w"), one)
        assert await store.delete_expired(10**15) == 0
        assert await store.count() == 1
    finally:
        await db.aclose()


def sql_database(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> SqlDatabase:
    """A database of ``kind`` with one connection at most (PostgreSQL): a connection a
    write left in a bad state would be the next statement's."""
    if kind == "postgresql":
        url = request.getfixturevalue("postgres").new_database()
        return PostgresDatabase(url, timeout=5.0, pool_size=1)
    return SqliteDatabase(str(tmp_path / "state.db"))


def keys(conn: Any) -> list[str]:
    return [str(row[0]) for row in conn.execute("SELECT k FROM t ORDER BY k").fetchall()]


@pytest.mark.parametrize("failure", ["the caller raises", "a statement fails"])
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_write_that_fails_leaves_nothing_and_the_next_one_works(
    kind: str,
    failure: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A write is all or nothing, after a read in it too (on PostgreSQL a write's
    statements are pipelined: a read sends what is queued, and a failed statement makes
    the server skip the rest, the ``ROLLBACK`` included). Its connection is rolled back
    before it is lent again, without the pool's warning."""
    db = sql_database(kind, tmp_path, request)
    try:
        await db.write(lambda conn: conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)"))

        def half(conn: Any) -> None:
            conn.execute("INSERT INTO t VALUES ('a')")
            assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
            conn.execute("INSERT INTO t VALUES ('b')")
            if failure == "the caller raises":
                raise ValueError("refused")
            conn.execute("INSERT INTO t VALUES ('a')")  # taken
            conn.execute("INSERT INTO t VALUES ('c')")

        expected: Any = ValueError
        if failure == "a statement fails":
            expected = StorageUnavailable if kind == "sqlite" else psycopg.errors.UniqueViolation
        with pytest.raises(expected):
            await db.write(half)
        assert await db.run(keys) == []
        assert await db.write(lambda conn: conn.execute("INSERT INTO t VALUES ('z')").rowcount) == 1
        assert await db.run(keys) == ["z"]
        assert "rolling back" not in caplog.text
    finally:
        await db.aclose()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_write_reads_what_it_changed(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Inside a write, a statement's row count and a later read see the earlier
    statements' changes (on PostgreSQL, pipelined: the count waits for the answers)."""
    db = sql_database(kind, tmp_path, request)
    try:
        await db.write(lambda conn: conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)"))

        def change(conn: Any) -> tuple[int, int, list[str]]:
            for key in "wxyz":
                conn.execute("INSERT INTO t VALUES (?)", (key,))
            deleted = conn.execute("DELETE FROM t WHERE k IN ('x', 'y', 'q')").rowcount
            updated = conn.execute("UPDATE t SET k = 'v' WHERE k = 'w'").rowcount
            return deleted, updated, keys(conn)

        assert await db.write(change) == (2, 1, ["v", "z"])
        assert await db.run(keys) == ["v", "z"]
    finally:
        await db.aclose()
