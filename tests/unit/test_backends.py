"""Backend URLs, and the SQLite backend's own parts: the shared key, signals between workers,
leases. (Tasks across workers: tests/interaction/test_shared_backend.py and tests/e2e.)"""

from __future__ import annotations

import contextlib
import itertools
import select
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
import trio
import trio.lowlevel
import trio.testing
from postgres_cluster import Cluster, running_cluster

from presa_trio import Server
from presa_trio._backends import postgres as _postgres
from presa_trio._backends import sqlite as _sqlite
from presa_trio._backends.postgres import POOL_SIZE, PostgresDatabase, check_database
from presa_trio._backends.sql import IDLE_POLL, MAX_BACKOFF, Retry
from presa_trio._backends.sqlite import SqliteDatabase, check_file
from presa_trio.backends import (
    BackendError,
    BackendHealth,
    BackendUrl,
    MemoryBackend,
    SharedBackend,
    SqlDatabase,
    StorageUnavailable,
    check_url,
    open_backend,
    parse_url,
)
from presa_trio.errors import CapacityExceeded
from presa_trio.ext.tasks import _sql_store
from presa_trio.ext.tasks._reapers import lost_tasks
from presa_trio.ext.tasks._sql_store import SqlTaskStore
from presa_trio.ext.tasks._states import Completed, Failed, Status, TaskRecord, apply
from presa_trio.ext.tasks._store import TaskLimits

# ------------------------------------------------------------------------------ URLs


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("memory:", BackendUrl("memory", "", {})),
        ("memory://", BackendUrl("memory", "", {})),
        ("sqlite:///var/lib/presa/state.db", BackendUrl("sqlite", "/var/lib/presa/state.db", {})),
        (
            "sqlite:////tmp/s.db?lease=3&poll=0.02&timeout=1",
            BackendUrl("sqlite", "/tmp/s.db", {"lease": "3", "poll": "0.02", "timeout": "1"}),
        ),
    ],
)
def test_a_backend_url_parses(url: str, parsed: BackendUrl) -> None:
    assert parse_url(url) == parsed


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "redis://localhost/0",
            "unknown store 'redis': use memory:, sqlite:///ABSOLUTE/PATH.db or postgresql://USER@HOST:PORT/DB",
        ),
        (
            "nonsense",
            "unknown store 'nonsense': use memory:, sqlite:///ABSOLUTE/PATH.db or postgresql://USER@HOST:PORT/DB",
        ),
        (
            "sqlite://host/x.db",
            "a sqlite store URL has no host: sqlite:///ABSOLUTE/PATH.db, got 'sqlite://host/x.db'",
        ),
        ("sqlite:state.db", "a sqlite store needs an absolute file path, got 'sqlite:state.db'"),
        ("sqlite:///tmp/", "a sqlite store needs an absolute file path, got 'sqlite:///tmp/'"),
        (
            "sqlite:///tmp/s.db?leese=3",
            "unknown sqlite store options ['leese']: known are lease, poll, timeout",
        ),
    ],
)
def test_a_bad_backend_url_is_one_clear_line(url: str, message: str) -> None:
    with pytest.raises(BackendError) as refused:
        parse_url(url)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("value", "message"),
    [("soon", "store option lease='soon' is not a number"), ("0", "must be positive")],
)
def test_a_bad_option_value_is_refused(value: str, message: str) -> None:
    with pytest.raises(BackendError, match=message):
        parse_url(f"sqlite:///tmp/s.db?lease={value}").number("lease", 20.0)
    assert parse_url("sqlite:///tmp/s.db").number("lease", 20.0) == 20.0


def test_a_server_refuses_a_bad_backend_when_declared() -> None:
    with pytest.raises(BackendError, match="unknown store 'mysql'"):
        Server("x", backend="mysql://db/x")
    with pytest.raises(BackendError, match="unknown store 'mysql'"):
        Server("x").asgi_app(backend="mysql://db/x")


def test_check_url_opens_the_file_or_says_why_not(tmp_path: Path) -> None:
    check_url(f"sqlite:///{tmp_path}/ok.db")
    assert (tmp_path / "ok.db").is_file()
    check_url("memory:")
    with pytest.raises(BackendError) as missing:
        check_url(f"sqlite:///{tmp_path}/no/such/dir/x.db")
    assert str(missing.value) == (
        f"cannot use the sqlite store {tmp_path}/no/such/dir/x.db: no directory "
        f"{tmp_path}/no/such/dir"
    )
    (tmp_path / "a-directory.db").mkdir()
    with pytest.raises(BackendError, match=r"^cannot use the sqlite store .*a-directory\.db: "):
        check_url(f"sqlite:///{tmp_path}/a-directory.db")
    (tmp_path / "garbage.db").write_bytes(b"not a database, " * 100)
    with pytest.raises(BackendError, match="file is not a database"):
        check_url(f"sqlite:///{tmp_path}/garbage.db")


# ------------------------------------------------------------------------------ memory


async def test_the_memory_backend_shares_nothing() -> None:
    async with open_backend() as backend:
        assert isinstance(backend, MemoryBackend)
        assert backend.shared is False
        assert await backend.shared_key() is None
        await backend.broadcast("bus", {"events": []})
        assert await backend.call(backend.worker_id, "x", {}) is None
    async with open_backend() as other:
        assert other.worker_id != backend.worker_id


# ------------------------------------------------------------------------------ background loops


def test_a_failing_loop_waits_twice_as_long_each_time_up_to_a_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A loop's failures: the delay doubles from the first to the bound and a success
    resets it; an unexpected error is logged once per episode with its traceback, a
    ``StorageUnavailable`` not at all (the database logged it), and both are the reason."""
    retry = Retry("test loop", 0.01, 0.05)
    assert retry.failing is None
    delays = [retry.failed(OSError(5, "Input/output error")) for _ in range(5)]
    assert delays == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert retry.failing == "OSError (see the log)"
    retry.worked()
    assert retry.failing is None
    assert retry.failed(StorageUnavailable("its database file was deleted")) == 0.01
    assert retry.failing == "its database file was deleted"
    retry.worked()
    logged = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert logged == [
        ("ERROR", "the test loop failed; it tries again, waiting at most 0.05 s", True),
        ("WARNING", "the test loop works again", False),
    ]


def test_a_failing_loop_lets_what_is_not_an_error_through() -> None:
    retry = Retry("test loop", 0.01, 0.05)
    with pytest.raises(KeyboardInterrupt):
        retry.failed(KeyboardInterrupt())
    with pytest.raises(BaseExceptionGroup) as raised:
        retry.failed(BaseExceptionGroup("both", [OSError(), KeyboardInterrupt()]))
    assert raised.group_contains(KeyboardInterrupt)
    assert not raised.group_contains(OSError)


async def test_a_failing_signal_loop_backs_off_and_is_cancelled_as_usual(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Every look failing (before any database work: no thread, so virtual time holds),
    the loop tries again after 0.01, 0.02, 0.04 ... seconds up to ``MAX_BACKOFF``; a
    cancellation that arrives in a look ends it like any other task, neither logged nor
    taken for a failure."""
    db = SqliteDatabase(str(tmp_path / "never-opened.db"))
    backend = SharedBackend(db, lease=20.0, poll=0.01)
    looks: list[float] = []

    async def failing(*args: Any) -> None:
        looks.append(trio.current_time())
        if len(looks) > 12:
            await trio.sleep_forever()  # the cancellation comes in here
        await trio.lowlevel.checkpoint()
        raise OSError(5, "Input/output error")

    db.changes = failing  # type: ignore[assignment, method-assign]
    with trio.move_on_after(60) as waited:
        await backend._watch_loop()
    assert waited.cancelled_caught
    waits = [round(b - a, 6) for a, b in itertools.pairwise(looks)]
    assert waits == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, *[MAX_BACKOFF] * 4]
    assert backend.health() == BackendHealth(
        False, "the sqlite signal loop fails: OSError (see the log)"
    )
    assert [r.getMessage() for r in caplog.records] == [
        "the sqlite signal loop failed; it tries again, waiting at most 2 s"
    ]


# ------------------------------------------------------------------------------ sqlite


def url_of(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/state.db?poll=0.005&lease=0.2"


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


def shared_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A new store of ``kind``: a file in ``tmp_path``, or a database of the run's cluster."""
    if kind == "postgresql":
        return str(request.getfixturevalue("postgres").new_database())
    return url_of(tmp_path)


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


def counting_looks(db: SqliteDatabase) -> list[int]:
    """Count ``db``'s reads of ``data_version`` (each one a thread hop): one entry per read."""
    looks: list[int] = []
    read = db._poll_once

    def counted(after: int) -> Any:
        looks.append(after)
        return read(after)

    db._poll_once = counted  # type: ignore[method-assign]
    return looks


def insert_message(conn: Any) -> None:
    conn.execute(
        "INSERT INTO presa_messages (origin, target, topic, body, created_ms) "
        "VALUES ('other', NULL, 'news', '{}', 0)"
    )


async def test_a_worker_expecting_signals_reads_nothing_while_nothing_is_written(
    tmp_path: Path,
) -> None:
    """Polling read ``data_version`` a hundred times a second, in a thread, for as long as
    a task ran or a listen stream was open; the directory watch reads it only after a
    write (Linux), and without inotify every ``poll`` as before."""
    path = str(tmp_path / "state.db")
    check_file(path)
    db = SqliteDatabase(path)
    looks = counting_looks(db)
    wake = trio.Event()
    with trio.move_on_after(0.5):
        while True:
            await db.changes(0, True, 0.01, wake)
    if sys.platform.startswith("linux"):
        assert looks == []
    else:
        assert len(looks) > 10
    await db.aclose()


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "polled"])
async def test_another_workers_commit_is_read_once_written(
    watched: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker waiting for signals reads a commit of another's: woken by the write to its
    log (the test above shows it does not poll then), or without a watch (another platform,
    or inotify's instances used up) by polling."""
    if not watched:
        monkeypatch.setattr(_sqlite.DirectoryWatch, "open", lambda directory: None)
    path = str(tmp_path / "state.db")
    check_file(path)
    waiting, other = SqliteDatabase(path), SqliteDatabase(path)
    rows: list[Any] = []

    async def wait_for_rows() -> None:
        while True:
            found = await waiting.changes(0, True, 0.01, trio.Event())
            if found:
                rows.extend(found)
                return

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_for_rows)
            await trio.testing.wait_all_tasks_blocked()
            await other.write(insert_message)
    assert [row[1:5] for row in rows] == [("other", None, "news", "{}")]
    await waiting.aclose()
    await other.aclose()


class Writes:
    """A watch that reports ``count`` writes, one per wait, then none (the real one reports
    the writes there were)."""

    def __init__(self, count: int) -> None:
        self.left = count

    async def written(self) -> None:
        if not self.left:
            await trio.sleep_forever()
        self.left -= 1
        await trio.lowlevel.checkpoint()

    def close(self) -> None:
        pass


async def first_look(db: SqliteDatabase, poll: float) -> None:
    """The first read of ``data_version`` (every later one compares with the last)."""
    awake = trio.Event()
    awake.set()
    assert await db.changes(0, False, poll, awake) == []


async def test_a_look_a_write_woke_that_found_nothing_is_not_held_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A look a write woke can find nothing: the commit was on its way, or the write was the
    first of two (a cancel writes the task's record, then its message). The next look
    follows the next write at once, or ``poll`` later if none comes, instead of no sooner
    than ``poll`` after the last and then up to a second. Once: the look after that is held
    back again, so a file written all the time is read at most twice per ``poll``. (Virtual
    time: the clock jumps to the next deadline whenever the test waits.)"""

    poll = 0.01
    path = str(tmp_path / "state.db")
    check_file(path)
    db, other = SqliteDatabase(path), SqliteDatabase(path)
    watch = Writes(1)
    db._writes_tried, db._writes = True, watch  # type: ignore[assignment]
    await first_look(db, poll)
    assert await db.changes(0, True, poll, trio.Event()) is None  # woken: nothing yet
    await other.write(insert_message)  # unseen by this watch
    started = trio.current_time()
    after = await db.changes(0, True, poll, trio.Event())
    assert after is not None and len(after) == 1
    assert trio.current_time() - started == pytest.approx(poll)  # not held back
    started = trio.current_time()
    assert await db.changes(0, True, poll, trio.Event()) is None
    assert trio.current_time() - started == pytest.approx(IDLE_POLL + poll)  # held back
    await db.aclose()
    await other.aclose()


async def test_after_a_look_a_write_woke_the_next_comes_within_poll(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Two commits reported together, the second not yet shown when the first is read (a
    commit is written before it shows): the look after one a write woke comes within
    ``poll`` even if nothing more is written, not a second later."""
    poll = 0.01
    path = str(tmp_path / "state.db")
    check_file(path)
    db, other = SqliteDatabase(path), SqliteDatabase(path)
    db._writes_tried, db._writes = True, Writes(1)  # type: ignore[assignment]
    await first_look(db, poll)
    await other.write(insert_message)
    assert len(await db.changes(0, True, poll, trio.Event()) or []) == 1  # woken
    await other.write(insert_message)  # its writing was reported with the first
    started = trio.current_time()
    assert len(await db.changes(1, True, poll, trio.Event()) or []) == 1
    assert trio.current_time() - started == pytest.approx(2 * poll)  # held back, then poll
    await db.aclose()
    await other.aclose()


async def test_a_file_written_all_the_time_is_read_at_most_twice_per_poll(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Writes that are not signals (task records, another directory's file) wake a worker
    that expects signals: of two looks in a row that a write woke and that found nothing,
    only the first lets the next one follow at once."""
    poll = 0.01
    path = str(tmp_path / "state.db")
    check_file(path)
    db = SqliteDatabase(path)
    db._writes_tried, db._writes = True, Writes(3)  # type: ignore[assignment]
    await first_look(db, poll)
    started = trio.current_time()
    for _ in range(3):
        assert await db.changes(0, True, poll, trio.Event()) is None
    # the first held back after the first look, the second not, the third again
    assert trio.current_time() - started == pytest.approx(2 * poll)
    await db.aclose()


def task(task_id: str, owner: str) -> TaskRecord:
    return TaskRecord(task_id, "p", "tool", Status.WORKING, 1, 1, None, None, owner=owner)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_orphans_are_the_unfinished_tasks_of_workers_gone_or_silent(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every unfinished task of every lost worker, and nothing else (``lost_tasks``: the
    store's owners, less the backend's live workers): the owners are found one after
    another, so each of several must be reached (the first, one between, the last), and
    owners with only finished tasks, or none at all, never count.

    Judged by a worker whose lease is ten minutes, so no worker that renews counts as lost
    however slow the machine (with 200 ms, under load, the live worker's own tasks did);
    silence is a heartbeat written as the epoch, and a renewal is waited for, not timed."""
    url = shared_url(kind, tmp_path, request)
    # renewals every half second: a silence lasts long enough to be seen, however slow
    url = url + "&lease=2" if kind == "postgresql" else f"sqlite:///{tmp_path}/state.db?lease=2"
    judging = url.replace("lease=2", "lease=600")
    unlimited = TaskLimits(None, None, None)
    async with (
        open_backend(url) as alive,
        open_backend(url) as idle,
        open_backend(judging) as judge,
    ):
        assert isinstance(alive, SharedBackend) and isinstance(judge, SharedBackend)
        store = SqlTaskStore(alive.db)
        async with open_backend(url) as leaving, open_backend(url) as also_leaving:
            for n in range(3):
                await store.create(task(f"mine{n}", alive.worker_id), unlimited)
                await store.create(task(f"theirs{n}", leaving.worker_id), unlimited)
                await store.create(task(f"also{n}", also_leaving.worker_id), unlimited)
            finished = TaskRecord(
                "done", "p", "tool", Status.COMPLETED, 1, 1, None, None, owner="long-gone"
            )
            await store.create(finished, unlimited)
            assert await lost_tasks(store, judge) == []
        lost = [f"{who}{n}" for who in ("also", "theirs") for n in range(3)]
        assert sorted(await lost_tasks(store, judge)) == lost  # they left

        def silence(conn: Any) -> None:  # and a silent worker
            conn.execute(
                "UPDATE presa_workers SET heartbeat_ms = 0 WHERE worker_id = ?",
                (alive.worker_id,),
            )

        def heartbeat(conn: Any) -> int:
            row = conn.execute(
                "SELECT heartbeat_ms FROM presa_workers WHERE worker_id = ?", (alive.worker_id,)
            ).fetchone()
            return int(row[0])

        # alive's own renewal may come between silence and sweep: then silence it again
        silenced: list[str] = []
        with trio.fail_after(10):
            while not silenced:
                await alive.db.write(silence)
                orphans = sorted(await lost_tasks(store, judge))
                if await alive.db.run(heartbeat) == 0:
                    silenced = orphans
        assert silenced == sorted([*lost, "mine0", "mine1", "mine2"])
        with trio.fail_after(10):  # until it renews its lease (every lease/4)
            while await alive.db.run(heartbeat) == 0:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert sorted(await lost_tasks(store, judge)) == lost
        assert idle.worker_id not in {alive.worker_id, leaving.worker_id}


async def test_sqlite_orphans_cost_the_same_however_many_tasks_are_unfinished(
    tmp_path: Path,
) -> None:
    """The lost-worker sweep, every quarter lease on every worker, seeks each owner of an
    unfinished task in the index (``SqlTaskStore.owners``) and reads only the lost owners'
    tasks. Counted in SQLite's own steps, it costs as much with 10,001 unfinished tasks of a
    live worker as with one; reading every unfinished task to check its owner cost a step
    or more for each."""
    async with open_backend(url_of(tmp_path)) as backend:
        assert isinstance(backend, SharedBackend)
        store = SqlTaskStore(backend.db)
        await store.create(task("t", backend.worker_id), TaskLimits(None, None, None))
        with contextlib.closing(sqlite3.connect(tmp_path / "state.db")) as conn:

            def steps() -> int:
                counted = 0

                def count() -> int:
                    nonlocal counted
                    counted += 1
                    return 0  # go on

                conn.set_progress_handler(count, 1)
                try:
                    owners = conn.execute(_sql_store._OWNERS).fetchall()
                    assert owners == [(backend.worker_id,)]
                finally:
                    conn.set_progress_handler(None, 1)
                return counted

            one = steps()
            conn.execute(
                "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)"
                " INSERT INTO presa_tasks SELECT task_id || '-' || i, principal, owner, revision,"
                " terminal, expires_ms, record FROM presa_tasks, n"
            )
            conn.commit()
            many = steps()
    assert many < 2 * one, (one, many)


# ------------------------------------------------------------------------------ postgresql


def test_workers_starting_together_open_a_new_sqlite_file(tmp_path: Path) -> None:
    """Connections switching one new file to WAL at the same moment all get it: SQLite
    refuses all but one with "database is locked" at once, without its busy timeout, and a
    worker's startup failed (so did hypercorn's other workers). Six at once, a hundred
    times: before the retry about one round in twelve failed."""
    errors: list[str] = []
    for round_ in range(100):
        path = str(tmp_path / f"round{round_}.db")
        barrier = threading.Barrier(6)

        def start(path: str = path, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                check_file(path)
            except BackendError as exc:  # collected for the assertion below
                errors.append(str(exc))

        in_threads_at_once(6, start)
    assert errors == []


def in_threads_at_once(count: int, start: Callable[[], None]) -> None:
    """``start`` in ``count`` threads started together, until every one has returned."""
    threads = [threading.Thread(target=start) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_instances_starting_together_migrate_once(postgres: Cluster) -> None:
    url = postgres.new_database()
    errors: list[BaseException] = []

    def start() -> None:
        try:
            check_database(url, 5.0)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    in_threads_at_once(6, start)
    assert errors == []
    with psycopg.connect(url) as db:
        version = db.execute("SELECT value FROM presa_meta WHERE key = 'schema_version'")
        assert version.fetchall() == [("1",)]


def test_a_newer_schema_is_refused(postgres: Cluster) -> None:
    url = postgres.new_database()
    check_database(url, 5.0)
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("UPDATE presa_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(BackendError, match=r"written by a newer presa_trio \(schema 99\)"):
        check_database(url, 5.0)


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


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_the_revision_fences_a_worker_declared_lost(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Once another worker failed a task of a worker it believed lost, that worker's late
    outcome (written against the revision it last saw) changes nothing."""
    url = shared_url(kind, tmp_path, request)
    async with open_backend(url) as backend:
        assert isinstance(backend, SharedBackend)
        store = SqlTaskStore(backend.db)
        mine = task("t", "lost-worker")
        await store.create(mine, TaskLimits(None, None, None))
        failed = apply(mine, Failed({"code": -32603, "message": "lost"}), 2)
        assert await store.compare_and_set(failed, mine.revision)  # the reaper's commit
        late = apply(mine, Completed({"content": []}), 3)  # the lost worker's, too late
        assert not await store.compare_and_set(late, mine.revision)
        assert await store.get("t") == failed


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


def test_without_psycopg_a_postgresql_url_says_what_to_install() -> None:
    program = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from presa_trio.backends import BackendError, check_url\n"
        "try:\n"
        "    check_url('postgresql://presa@/presa')\n"
        "except BackendError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == (
        "the postgresql store needs psycopg: pip install 'presa_trio[postgres]'\n"
    )
