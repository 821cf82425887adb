"""SQLite under the shared backend: the worker processes of one host share one file.

The standard library's ``sqlite3`` in WAL mode (readers never wait for the writer), every
call in a worker thread through ``trio.to_thread`` under a bounded limiter, so the event loop
never blocks on the file. Writes take the lock at once (``BEGIN IMMEDIATE``) and wait for it
at most ``timeout`` seconds; a statement that fails leaves nothing half written (each write
is one transaction) and is answered as a retryable ``StorageUnavailable``, never a traceback.

While the backend is open, one writer task per worker (``SqliteDatabase.serve``) takes its
writes: what is queued when it looks goes to its thread in one hop, on its own connection,
and commits together (group commit), each write in a savepoint of its own, none acknowledged
before the ``COMMIT``. A reader does the same for the reads (``read``), on a connection and
a thread of its own: in WAL a read never waits for a writer, so a write that waits for
another process's lock holds up only the writes queued behind it. Other calls (``run``)
keep their own threads and pooled connections.

New signals are noticed with ``PRAGMA data_version``, which changes when another connection
commits: a cheap read that fetches new rows only when there are any. While the worker
expects signals (a listen stream is open, a task runs there, or it waits for an answer) it
reads it when a file in the database's directory is written (every commit writes the
write-ahead log; Linux's inotify tells, ``_dir_watch``), at most every ``poll`` seconds (10
ms by default) and at least once a second; where there is no inotify, every ``poll``
seconds. Otherwise it looks once a second. A signal therefore reaches a worker that expects
it within one poll interval, within one read of its commit if the worker has not looked in
the last one, and a worker that waits reads nothing while nothing is written.

The file is the one at the path when the first connection opened it, for the whole run. A
file deleted under a running worker (``rm presa.db*``, a redeploy that wipes a directory) or
replaced (``mv other.db presa.db``) would take every write after it with it, each one
acknowledged: so every call looks at the path (one ``stat``, a few microseconds, in the
worker thread that runs it) and a write does so before its ``COMMIT`` and after it. Once
the path names another file, or none, the worker refuses (``SqliteDatabase`` says why it
does not pick up a new file) and says so in one error line.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, NoReturn, TypeVar, final
from urllib.parse import quote

import outcome
import trio

from .batches import Batcher, Job
from .dir_watch import DirectoryWatch
from .protocol import BackendError
from .sql import (
    DEFAULT_LEASE,
    IDLE_POLL,
    Connection,
    Health,
    Message,
    Select,
    SharedBackend,
    StorageUnavailable,
    in_transaction,
    messages_after,
    record_schema_version,
)
from .tally import Tally

logger = logging.getLogger("presa_trio.sqlite")

T = TypeVar("T")

SCHEMA_VERSION = 1
BUSY_TIMEOUT = 5.0  # seconds a statement waits for another writer's lock
POOL_SIZE = 4
_WAL_RETRY_SECONDS = 0.005
DEFAULT_POLL = 0.01

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS presa_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS presa_workers "
    "(worker_id TEXT PRIMARY KEY, heartbeat_ms BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS presa_messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "origin TEXT NOT NULL, target TEXT, topic TEXT NOT NULL, body TEXT NOT NULL, "
    "created_ms BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS presa_messages_created ON presa_messages (created_ms)",
)


def connect(
    path: str, busy_timeout: float = BUSY_TIMEOUT, *, create: bool = True
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, and waits for
    another writer's lock bounded by ``busy_timeout`` seconds. Without ``create``, a file
    that is not there is an error (``SQLITE_CANTOPEN``) rather than made anew."""
    target = path if create else f"file:{quote(path)}?mode=rw"
    conn = sqlite3.connect(
        target, timeout=busy_timeout, isolation_level=None, check_same_thread=False, uri=not create
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        _use_wal(conn, busy_timeout)
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def _use_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Put the file in WAL mode (a file keeps it). When several connections switch a new
    file at the same moment (workers starting together), SQLite refuses all but one with
    "database is locked" at once, without waiting out the busy timeout: the others try
    again, within that timeout. Called in a worker thread, never on the event loop."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(_WAL_RETRY_SECONDS)


def migrate(conn: sqlite3.Connection) -> None:
    """Create the backend's tables once; safe when several workers start at once (the
    whole migration is one ``BEGIN IMMEDIATE`` transaction, and every statement is
    idempotent). Refuses a database written by a newer presa_trio."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA:
            conn.execute(statement)
        record_schema_version(conn, SCHEMA_VERSION)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def check_file(path: str) -> None:
    """Open ``path`` (creating it) and migrate it, or raise a one-line ``BackendError``."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise BackendError(f"cannot use the sqlite store {path}: no directory {directory}")
    try:
        conn = connect(path)
        try:
            migrate(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise BackendError(f"cannot use the sqlite store {path}: {exc}") from None


class _Moved(Exception):
    """The store's path no longer names the file this database opened: ``how`` it went."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


@final
class SqliteDatabase:
    """A bounded pool of connections to one SQLite file, used from trio (a ``SqlDatabase``).

    A database failure (locked past the busy timeout, unwritable, gone) raises
    ``StorageUnavailable``, is logged once per episode, and the next call tries a fresh
    connection: the server recovers by itself.

    The file deleted or replaced under it is different: nothing more is written or read
    (``StorageUnavailable``, logged once), for the rest of the run, also once a file is at
    the path again. A new file is not picked up because what the worker holds belongs to
    the old one: the number of the last signal it read (a restored copy numbers its own),
    its row among the workers, the tasks it runs, whose records are in the old file. A
    restored copy holds tasks that name this worker as their owner; it does not run them,
    and while it renews its lease nobody would fail them. A restart gives the worker a new
    name, under which those tasks belong to a lost worker and are failed at once, and opens
    the file at the path. So the worker asks for a restart (its health says so too,
    ``SharedBackend.health``), and serves whatever does not need the store meanwhile.
    """

    kind = "sqlite"
    # one statement is a transaction with the write lock; the others see data_version move
    append = (
        "INSERT INTO presa_messages (origin, target, topic, body, created_ms) "
        "VALUES (?, ?, ?, ?, ?)"
    )
    clock = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

    def __init__(
        self, path: str, pool_size: int = POOL_SIZE, busy_timeout: float = BUSY_TIMEOUT
    ) -> None:
        self.path = path
        self.timeout = busy_timeout
        self._limiter = trio.CapacityLimiter(pool_size)
        self._idle: list[sqlite3.Connection] = []
        self._health = Health("sqlite", logger)
        self._watch: sqlite3.Connection | None = None
        self._version: int | None = None
        self._directory = os.path.dirname(os.path.abspath(path))
        self._writes: DirectoryWatch | None = None  # opened by the first ``changes``
        self._writes_tried = False
        self._looked = float("-inf")  # when ``changes`` last read data_version
        self._woken = False  # the last read followed a write (see changes)
        self._missed = False  # and found nothing
        self._file: tuple[int, int] | None = None  # (st_dev, st_ino) of the file opened first
        self._adopting = threading.Lock()
        self._moved: str | None = None  # why every call is refused, once the file is gone
        self._closed = False
        # The writer and the reader while they run (``serve``); else each call hops alone.
        self._writing = Batcher("the sqlite writer", self._writes_in_thread, logger, self._batched)
        self._reading = Batcher("the sqlite reader", self._reads_in_thread, logger, self._batched)
        self._writer: sqlite3.Connection | None = None  # the writer's own connection
        self._reader: sqlite3.Connection | None = None  # the reader's own connection
        #: Counts of this database's work, for benchmarks and tests (None: not counted).
        self.tally: Tally | None = None

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self.close()

    def close(self) -> None:
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if self._writes is not None:
            self._writes.close()
            self._writes = None

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)`` in a worker thread (autocommit: each statement its own
        transaction). A database failure raises ``StorageUnavailable``, and so does a path
        that no longer names the file after ``fn`` ran: what it wrote is not acknowledged."""
        if self.tally is not None:
            fn = self.tally.counting(fn)
        if self._moved is not None:
            await trio.lowlevel.checkpoint()
            raise StorageUnavailable(self._moved)
        async with self._limiter:
            conn = self._idle.pop() if self._idle else None
            try:
                opened, result = await trio.to_thread.run_sync(self._in_thread, conn, fn)
            except _Moved as moved:  # found when opening a connection
                self._refuse(moved)
            except sqlite3.Error as exc:  # opening a connection failed
                self._health.failed(str(exc))
                raise StorageUnavailable() from None
            except BaseException:
                if conn is not None:  # cancelled before a thread took it: still good
                    self._give_back(conn)
                raise
            fault = result.error if isinstance(result, outcome.Error) else None
            if isinstance(fault, sqlite3.Error | _Moved) or opened.in_transaction:
                opened.close()  # a fresh connection next time: the file may have come back
            else:
                self._give_back(opened)
        return self._answer(result)

    def _answer(self, result: outcome.Outcome[T]) -> T:
        """A call's outcome as its caller sees it: a database failure is
        ``StorageUnavailable``, a file moved refuses every call from now on."""
        fault = result.error if isinstance(result, outcome.Error) else None
        if isinstance(fault, _Moved):
            self._refuse(fault)
        if isinstance(fault, sqlite3.Error):
            self._health.failed(str(fault))
            raise StorageUnavailable() from None
        if fault is None:
            self._health.worked()
        return result.unwrap()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run this worker's writer and reader until cancelled (see the module docstring).
        When they stop, what is queued is answered ``StorageUnavailable`` and later calls
        run in threads of their own again."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._writing.serve)
                await nursery.start(self._reading.serve)
                task_status.started()
        finally:
            for conn in (self._writer, self._reader):
                if conn is not None:
                    conn.close()
            self._writer = self._reader = None

    def _batched(self) -> None:
        if self.tally is not None:
            self.tally.batched()

    def _writes_in_thread(self, batch: list[Job], lane: int) -> None:
        """Each write's outcome: all committed together, or the ones that raised undone
        alone. Then the path must still name the file, or none is acknowledged. (One lane:
        SQLite has one write lock.)"""
        conn = self._writer
        if conn is None:
            try:
                conn = self._writer = self._open()
            except (sqlite3.Error, _Moved) as exc:
                for job in batch:
                    job.result = outcome.Error(exc)
                return
        self._commit_together(conn, batch)
        if self._checked(batch) or conn.in_transaction:
            conn.close()  # a fresh connection next time: the file may have come back
            self._writer = None

    def _reads_in_thread(self, batch: list[Job], lane: int) -> None:
        """Each read's outcome, one after another on the reader's connection (each its own
        transaction: in WAL, none waits for a writer). Then the path must still name the
        file, or none is answered. (One lane: a read on the file is quick.)"""
        conn = self._reader
        if conn is None:
            try:
                conn = self._reader = self._open()
            except (sqlite3.Error, _Moved) as exc:
                for job in batch:
                    job.result = outcome.Error(exc)
                return
        for job in batch:
            job.result = outcome.capture(job.fn, conn)
        if self._checked(batch) or conn.in_transaction:
            if conn.in_transaction:
                conn.rollback()
            conn.close()
            self._reader = None

    def _checked(self, batch: list[Job]) -> bool:
        """Fail every job of ``batch`` unless the path still names the file; whether any
        failed as the database did (its connection is then not used again)."""
        try:
            self._check_file()
        except (_Moved, sqlite3.Error) as exc:
            for job in batch:
                job.result = outcome.Error(exc)
        return any(
            isinstance(job.result, outcome.Error)
            and isinstance(job.result.error, sqlite3.Error | _Moved)
            for job in batch
        )

    def _commit_together(self, conn: sqlite3.Connection, writes: list[Job]) -> None:
        """``writes`` in one ``BEGIN IMMEDIATE`` transaction, each in a savepoint: one that
        raises is rolled back to its savepoint and fails alone; the rest commit together. A
        failure of the transaction itself (its lock, its ``COMMIT``, the file moved) fails
        them all, and nothing of theirs is written."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for job in writes:
                    conn.execute("SAVEPOINT presa_write")
                    job.result = outcome.capture(job.fn, conn)
                    if isinstance(job.result, outcome.Error):
                        conn.execute("ROLLBACK TO presa_write")
                    conn.execute("RELEASE presa_write")
                self._check_file()
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except (sqlite3.Error, _Moved) as exc:
            for job in writes:
                job.result = outcome.Error(exc)

    def _give_back(self, conn: sqlite3.Connection) -> None:
        """Pool ``conn`` again, or close it: the database is closed, or refused. (A
        connection never closed keeps the file's write-ahead log from being checkpointed
        and removed when the last one closes.)"""
        if self._closed or self._moved is not None:
            conn.close()
        else:
            self._idle.append(conn)

    async def write(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)`` inside one ``BEGIN IMMEDIATE`` transaction: all or nothing,
        and serialised with every other write to the file. Once started it runs to its end
        (a worker thread cannot be interrupted), so a cancelled caller never leaves half a
        change. Committed only if the path still names the file (nothing goes into a file
        no one will read, or into the write-ahead log a new file at the path would read).
        While the writer runs (``serve``), the transaction may hold other calls' writes too,
        each in its own savepoint: ``fn`` is still all or nothing, and acknowledged only
        once their ``COMMIT`` is done."""

        def checked(conn: Connection) -> T:
            result = fn(conn)
            self._check_file()
            return result

        if self.tally is not None:
            self.tally.wrote()
        handed = await self._to_writer(checked)
        if handed is not None:
            return self._answer(handed)
        return await self.run(in_transaction(("BEGIN IMMEDIATE",), checked))

    async def update(self, fn: Callable[[Connection], Any]) -> int:
        """``fn``'s one statement that writes, and the count of rows it changed: while the
        writer runs, committed with the others it has (SQLite has one write lock: a write
        waits for it anyway); otherwise as ``run`` runs it, in autocommit (no ``BEGIN`` and
        ``COMMIT`` around it)."""

        def checked(conn: Connection) -> int:
            changed = int(fn(conn).rowcount)
            self._check_file()
            return changed

        handed = await self._to_writer(checked)  # (a call, not a write, in the tally)
        if handed is not None:
            return self._answer(handed)
        return await self.run(lambda conn: int(fn(conn).rowcount))

    async def _to_writer(self, fn: Callable[[Connection], T]) -> outcome.Outcome[T] | None:
        """``fn``'s outcome, committed by the writer with the others it has; None when the
        writer does not run (or the file is refused): the caller runs it itself."""
        if not self._writing.serving or self._moved is not None:
            await trio.lowlevel.checkpoint()
            return None
        call = fn if self.tally is None else self.tally.counting(fn)
        return await self._writing.hand(call)

    async def select(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        """The rows of one ``SELECT``, read as ``read`` reads."""
        return await self.read(Select(sql, parameters))

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """``fn``, which only reads, as ``run`` runs it; while the reader runs (``serve``),
        on its connection in a batch with the other reads queued (one thread hop for all).
        It never waits for a write: the writer has a connection and a thread of its own."""
        if self._reading.serving and self._moved is None:
            call = fn if self.tally is None else self.tally.counting(fn)
            handed = await self._reading.hand(call)
            if handed is not None:
                return self._answer(handed)
        return await self.run(fn)

    def _refuse(self, moved: _Moved) -> NoReturn:
        """From now on, refuse every call: the file at the path is not the one opened."""
        if self._moved is None:
            self._moved = f"its database file was {moved.how}; restart this worker"
            logger.error(
                "the sqlite store's database file was %s under this running worker (its path "
                "names %s): it writes nothing more, and requests that need the store get 503 "
                "until the worker is restarted",
                moved.how,
                "no file now" if moved.how == "deleted" else "another file now",
            )
            for conn in self._idle:
                conn.close()  # no checkpoint: SQLite sees the file moved
            self._idle.clear()
        raise StorageUnavailable(self._moved) from None

    async def changes(
        self, after: int, attentive: bool, poll: float, wake: trio.Event, own: str = ""
    ) -> list[Message] | None:
        if self._moved is not None:
            self._close_watch()
            await trio.lowlevel.checkpoint()
            raise StorageUnavailable(self._moved)
        written = False
        if attentive:
            written = await self._until_written(poll)
        else:
            with trio.move_on_after(IDLE_POLL) as idle:
                await wake.wait()
            if not idle.cancelled_caught and self._watch is not None and self._watched():
                # Attention began, after a first look: what it expects is written from now
                # on, and the watch says when (a look now would find nothing for it: one
                # read per request that attends, on a busy server).
                written = await self._until_written(poll)
        self._looked = trio.current_time()
        if self.tally is not None:
            self.tally.looked()
        try:
            rows = await trio.to_thread.run_sync(self._poll_once, after)
        except _Moved as moved:
            self._close_watch()
            self._refuse(moved)
        except sqlite3.Error as exc:
            self._health.failed(str(exc))
            self._close_watch()
            raise StorageUnavailable() from None
        # A commit's writing is reported before the commit shows, so a look a write woke
        # may have come too early for it, or for a commit reported with it: the next look
        # comes within ``poll`` even if nothing more is written. One that found nothing
        # (or the write was the first of two, as a cancel writes the record, then the
        # message) is not held back either; the one after such a look is.
        self._woken = written
        self._missed = written and not rows and not self._missed
        return rows

    async def _until_written(self, poll: float) -> bool:
        """Wait until another connection may have committed; whether a write said so.

        With a watch on the directory, until a file there is written: no sooner than
        ``poll`` after the last look, so a busy file is read no more often than by polling
        (at most twice per ``poll``, see ``changes``), and at most a second, or ``poll``
        after a look a write woke. Without a watch, ``poll``."""
        if not self._watched():
            await trio.sleep(poll)
            return False
        assert self._writes is not None
        if not self._missed:
            await trio.sleep_until(self._looked + poll)
        with trio.move_on_after(poll if self._woken else IDLE_POLL):
            await self._writes.written()
            return True
        return False

    def _watched(self) -> bool:
        """Whether writes to the file's directory are watched (opened on first use)."""
        if not self._writes_tried:
            self._writes_tried = True
            self._writes = DirectoryWatch.open(self._directory)
        return self._writes is not None

    def _close_watch(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def _poll_once(self, after: int) -> list[Message] | None:
        """The rows after ``after`` when anyone committed since the last look."""
        if self._watch is None:
            self._watch = self._open()
        try:
            rows = self._look(self._watch, after)
        except sqlite3.Error:
            self._check_file()  # a file that went is why, if it did
            raise
        self._check_file()
        return rows

    def _look(self, watch: sqlite3.Connection, after: int) -> list[Message] | None:
        version = watch.execute("PRAGMA data_version").fetchone()[0]
        if version == self._version:
            return None
        self._version = version
        return messages_after(watch, after)

    def _in_thread(
        self, conn: sqlite3.Connection | None, fn: Callable[[Connection], T]
    ) -> tuple[sqlite3.Connection, outcome.Outcome[T]]:
        if conn is None:
            conn = self._open()
        result = outcome.capture(fn, conn)
        try:
            self._check_file()  # (after a write's COMMIT: was it the file at the path?)
        except (_Moved, sqlite3.Error) as exc:
            result = outcome.Error(exc)
        return conn, result

    # The file: in a worker thread, all of these.

    def _identity(self) -> tuple[int, int]:
        """``(st_dev, st_ino)`` of the file at the path; ``_Moved`` if there is none."""
        try:
            found = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            raise _Moved("deleted") from None
        except OSError as exc:  # the path cannot be looked at: a failure like any other
            raise sqlite3.OperationalError(
                f"cannot look at the database file: {exc.strerror}"
            ) from None
        return found.st_dev, found.st_ino

    def _check_file(self) -> None:
        """Raise ``_Moved`` unless the path still names the file first opened."""
        if self._identity() != self._file:
            raise _Moved("replaced")

    def _open(self) -> sqlite3.Connection:
        """A new connection to the file. The path names the same file just before and just
        after it opens: that is the file it opened. The first connection's is the file (it
        may create it: ``open_sqlite`` has, but a database made by hand need not); no other
        creates one, so a worker never puts an empty file where the file was deleted."""
        try:
            before: tuple[int, int] | None = self._identity()
        except _Moved:
            if self._file is not None:
                raise
            before = None
        try:
            conn = connect(self.path, self.timeout, create=self._file is None)
        except sqlite3.Error:
            self._identity()  # deleted as it was opened: say so
            raise
        try:
            after = self._identity()
            with self._adopting:
                if self._file is None and before in (None, after):
                    self._file = after
            if self._file is None:  # replaced as the first connection opened: try again
                raise sqlite3.OperationalError("the database file changed as it was opened")
            if after != self._file or before not in (None, after):
                raise _Moved("replaced")
        except BaseException:
            conn.close()
            raise
        return conn


@asynccontextmanager
async def open_sqlite(
    path: str,
    *,
    lease: float = DEFAULT_LEASE,
    poll: float = DEFAULT_POLL,
    busy_timeout: float = BUSY_TIMEOUT,
) -> AsyncIterator[SharedBackend]:
    """The shared backend on the SQLite file ``path``, created and migrated if need be."""
    await trio.to_thread.run_sync(check_file, path)
    db = SqliteDatabase(path, busy_timeout=busy_timeout)
    async with SharedBackend.open(db, lease=lease, poll=poll) as backend:
        yield backend
