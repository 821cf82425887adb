"""What workers share through a backend: nothing on the memory backend; on SQLite and PostgreSQL
one key, broadcasts in order to every other worker, and calls answered by the worker named."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
import trio
import trio.lowlevel
import trio.testing
from support.postgres_cluster import Cluster
from support.stores import shared_url, url_of

from presa_trio._backends import postgres as _postgres
from presa_trio._backends.postgres import PostgresDatabase, check_database
from presa_trio._backends.sql import IDLE_POLL
from presa_trio._backends.sqlite import SqliteDatabase, check_file
from presa_trio.backends import MemoryBackend, SharedBackend, open_backend


async def test_the_memory_backend_shares_nothing() -> None:
    async with open_backend() as backend:
        assert isinstance(backend, MemoryBackend)
        assert backend.shared is False
        assert await backend.shared_key() is None
        await backend.broadcast("bus", {"events": []})
        assert await backend.call(backend.worker_id, "x", {}) is None
    async with open_backend() as other:
        assert other.worker_id != backend.worker_id


async def test_every_worker_gets_the_same_key_and_it_outlives_them(tmp_path: Path) -> None:
    async with open_backend(url_of(tmp_path)) as one, open_backend(url_of(tmp_path)) as two:
        assert isinstance(one, SharedBackend)
        key = await one.shared_key()
        assert key is not None and len(key) == 32
        assert await two.shared_key() == key
        assert one.worker_id != two.worker_id
    async with open_backend(url_of(tmp_path)) as later:
        assert await later.shared_key() == key


async def test_a_broadcast_reaches_every_other_worker_in_order(tmp_path: Path) -> None:
    received: dict[str, list[Any]] = {"one": [], "two": [], "three": []}
    async with (
        open_backend(url_of(tmp_path)) as one,
        open_backend(url_of(tmp_path)) as two,
        open_backend(url_of(tmp_path)) as three,
    ):
        for name, backend in (("one", one), ("two", two), ("three", three)):
            backend.on_broadcast("news", received[name].append)
        for n in range(5):
            await one.broadcast("news", {"n": n})
        await two.broadcast("other topic", {"n": -1})
        with trio.fail_after(5):
            while len(received["two"]) < 5 or len(received["three"]) < 5:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert received["two"] == received["three"] == [{"n": n} for n in range(5)]
        assert received["one"] == [], "a worker does not hear its own broadcasts"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_message_waits_behind_a_write_and_arrives_after_it(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A message is appended in the order of the writes (a reader reads on from the last
    number it saw, so a row numbered before another must not commit after it): while
    another transaction holds the write lock, the message is not in, and once it ends the
    message reaches the other worker."""
    url = shared_url(kind, tmp_path, request)
    received: list[Any] = []
    async with open_backend(url) as one, open_backend(url) as two:
        assert isinstance(one, SharedBackend)
        two.on_broadcast("news", received.append)
        if kind == "postgresql":
            holder: Any = psycopg.connect(url, autocommit=True)
            holder.execute("BEGIN")
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (_postgres.WRITE_LOCK,))
        else:
            holder = sqlite3.connect(f"{tmp_path}/state.db", isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(one.broadcast, "news", {"n": 1})
                await trio.sleep(0.3)
                rows = holder.execute("SELECT count(*) FROM presa_messages").fetchone()
                assert rows == (0,), "a message went in while another write held the lock"
                holder.execute("COMMIT")
        finally:
            holder.close()
        with trio.fail_after(5):
            while not received:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert received == [{"n": 1}]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_messages_sent_at_once_from_two_workers_all_arrive(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Forty messages sent concurrently by two workers, each reach the third worker once."""
    url = shared_url(kind, tmp_path, request)
    received: list[Any] = []
    async with (
        open_backend(url) as one,
        open_backend(url) as two,
        open_backend(url) as three,
    ):
        three.on_broadcast("news", received.append)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for n in range(20):
                    nursery.start_soon(one.broadcast, "news", {"from": 1, "n": n})
                    nursery.start_soon(two.broadcast, "news", {"from": 2, "n": n})
            while len(received) < 40:  # noqa: ASYNC110
                await trio.sleep(0.01)
        expected = [{"from": f, "n": n} for f in (1, 2) for n in range(20)]
        assert sorted(received, key=lambda m: (m["from"], m["n"])) == expected


async def test_a_message_on_postgresql_notifies_as_it_commits(postgres: Cluster) -> None:
    """The statement that appends a message also wakes every listener (``NOTIFY``): a
    worker waiting for signals learns at once rather than at its next look."""
    url = postgres.new_database()
    async with open_backend(url) as one:
        with psycopg.connect(url, autocommit=True) as listener:
            listener.execute(f"LISTEN {_postgres.CHANNEL}")
            await one.broadcast("news", {"n": 1})
            heard = await trio.to_thread.run_sync(
                lambda: [n.channel for n in listener.notifies(timeout=5, stop_after=1)]
            )
        assert heard == [_postgres.CHANNEL]


async def test_a_postgresql_worker_does_not_read_back_what_only_it_wrote(
    postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Woken only by its own messages' notifications, a worker has nothing new to read;
    another worker's message is read with them, and a worker reads at least once a second
    whoever wrote (the rows are the truth). The second is the backend's clock, which the
    test moves itself: how fast the machine is changes nothing."""
    url = postgres.new_database()
    check_database(url, 5.0)
    db = PostgresDatabase(url, timeout=5.0)
    await db.open()
    reads: list[int] = []
    messages = _postgres.messages_after
    now = [1_000.0]

    def counted(conn: Any, after: int) -> Any:
        reads.append(after)
        return messages(conn, after)

    monkeypatch.setattr(_postgres, "messages_after", counted)
    monkeypatch.setattr(_postgres, "time", SimpleNamespace(monotonic=lambda: now[0]))
    run = db.run

    async def send(origin: str, n: int) -> None:
        def append(conn: Any) -> None:
            conn.execute(db.append, (origin, None, "news", f'{{"n":{n}}}', 0))

        await run(append)

    try:
        with trio.fail_after(10):
            assert await db.changes(0, True, 0.01, trio.Event(), own="me") is None  # a second
            assert len(reads) == 1
            await send("me", 1)
            assert await db.changes(0, True, 0.01, trio.Event(), own="me") is None
            assert len(reads) == 1, "read back a message only this worker wrote"
            await send("me", 2)
            await send("other", 3)
            rows = []
            while len(rows) < 3:  # the first wake may be this worker's own: not read
                rows = await db.changes(0, True, 0.01, trio.Event(), own="me") or []
            assert [(row[1], row[4]) for row in rows] == [
                ("me", '{"n":1}'),
                ("me", '{"n":2}'),
                ("other", '{"n":3}'),
            ]
            read = len(reads)
            now[0] += IDLE_POLL
            await send("me", 4)
            found = await db.changes(3, True, 0.01, trio.Event(), own="me")
            assert len(reads) == read + 1, "no read for over a second"
            assert [(row[1], row[4]) for row in found or []] == [("me", '{"n":4}')]
    finally:
        await db.aclose()


async def test_a_call_is_answered_by_the_worker_named(tmp_path: Path) -> None:
    async with open_backend(url_of(tmp_path)) as one, open_backend(url_of(tmp_path)) as two:
        asked: list[Any] = []

        async def double(body: Any) -> dict[str, Any]:
            asked.append(body)
            await trio.lowlevel.checkpoint()
            return {"twice": body["n"] * 2}

        two.on_call("double", double)
        with trio.fail_after(5):
            assert await one.call(two.worker_id, "double", {"n": 21}) == {"twice": 42}
        assert asked == [{"n": 21}]

        async def broken(body: Any) -> dict[str, Any]:
            await trio.lowlevel.checkpoint()
            raise RuntimeError("boom")

        two.on_call("broken", broken)
        with trio.fail_after(5):
            assert await one.call(two.worker_id, "broken", {}) is None
        # A worker that is not there never answers: the caller's bound decides.
        with trio.move_on_after(0.2) as waited:
            await one.call("no-such-worker", "double", {"n": 1})
        assert waited.cancelled_caught


async def test_a_call_cancelled_as_it_starts_gives_its_connection_back(tmp_path: Path) -> None:
    """Cancelled after it took a pooled connection and before a thread did, a call lost the
    connection: open until garbage-collected, it kept the file's write-ahead log from being
    checkpointed and removed when the database closed (a file moved into its place would
    read that log). Now it goes back to the pool, and closing removes the log."""
    path = tmp_path / "state.db"
    check_file(str(path))
    db = SqliteDatabase(str(path))

    def one(conn: Any) -> Any:
        return conn.execute("SELECT 1").fetchone()

    try:
        assert await db.run(one) == (1,)
        for _ in range(3):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(db.run, one)
                await trio.lowlevel.checkpoint()  # it has the limiter and yields once
                nursery.cancel_scope.cancel()
            assert len(db._idle) == 1
    finally:
        await db.aclose()
    assert not Path(f"{path}-wal").exists()  # noqa: ASYNC240 (a test's one look at its file)
