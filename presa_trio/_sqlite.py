"""SQLite under the shared backend: the worker processes of one host share one file.

The standard library's ``sqlite3`` in WAL mode (readers never wait for the writer), every
call in a worker thread through ``trio.to_thread`` under a bounded limiter, so the event loop
never blocks on the file. Writes take the lock at once (``BEGIN IMMEDIATE``) and wait for it
at most ``timeout`` seconds; a statement that fails leaves nothing half written (each write
is one transaction) and is answered as a retryable ``StorageUnavailable``, never a traceback.

New signals are noticed with ``PRAGMA data_version``, which changes when another connection
commits: a cheap read that fetches new rows only when there are any. While the worker
expects signals (a listen stream is open, a task runs there, or it waits for an answer) it
reads it when a file in the database's directory is written (every commit writes the
write-ahead log; Linux's inotify tells, ``_dir_watch``), at most every ``poll`` seconds (10
ms by default) and at least once a second; where there is no inotify, every ``poll``
seconds. Otherwise it looks once a second. A signal therefore reaches a worker that expects
it within one poll interval, within one read of its commit if the worker has not looked in
the last one, and a worker that waits reads nothing while nothing is written.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeVar, final

import outcome
import trio

from ._backend import BackendError
from ._dir_watch import DirectoryWatch
from ._shared import (
    DEFAULT_LEASE,
    IDLE_POLL,
    Connection,
    Health,
    Message,
    SharedBackend,
    StorageUnavailable,
    in_transaction,
    messages_after,
    record_schema_version,
)

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


def connect(path: str, busy_timeout: float = BUSY_TIMEOUT) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, and waits for
    another writer's lock bounded by ``busy_timeout`` seconds."""
    conn = sqlite3.connect(
        path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
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


@final
class SqliteDatabase:
    """A bounded pool of connections to one SQLite file, used from trio (a ``SqlDatabase``).

    A database failure (locked past the busy timeout, unwritable, gone) raises
    ``StorageUnavailable``, is logged once per episode, and the next call tries a fresh
    connection: the server recovers by itself.
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

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self.close()

    def close(self) -> None:
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
        transaction). A database failure raises ``StorageUnavailable``."""
        async with self._limiter:
            conn = self._idle.pop() if self._idle else None
            try:
                opened, result = await trio.to_thread.run_sync(self._in_thread, conn, fn)
            except sqlite3.Error as exc:  # opening a connection failed
                self._health.failed(str(exc))
                raise StorageUnavailable() from None
            fault = result.error if isinstance(result, outcome.Error) else None
            if isinstance(fault, sqlite3.Error) or opened.in_transaction:
                opened.close()  # a fresh connection next time: the file may have come back
            else:
                self._idle.append(opened)
        if isinstance(fault, sqlite3.Error):
            self._health.failed(str(fault))
            raise StorageUnavailable() from None
        if fault is None:
            self._health.worked()
        return result.unwrap()

    async def write(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)`` inside one ``BEGIN IMMEDIATE`` transaction: all or nothing,
        and serialised with every other write to the file. Once started it runs to its end
        (a worker thread cannot be interrupted), so a cancelled caller never leaves half a
        change."""

        return await self.run(in_transaction(("BEGIN IMMEDIATE",), fn))

    async def changes(
        self, after: int, attentive: bool, poll: float, wake: trio.Event, own: str = ""
    ) -> list[Message] | None:
        written = False
        if attentive:
            written = await self._until_written(poll)
        else:
            with trio.move_on_after(IDLE_POLL):
                await wake.wait()
        self._looked = trio.current_time()
        try:
            rows = await trio.to_thread.run_sync(self._poll_once, after)
        except sqlite3.Error as exc:
            self._health.failed(str(exc))
            if self._watch is not None:
                self._watch.close()
                self._watch = None
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
        if not self._writes_tried:
            self._writes_tried = True
            self._writes = DirectoryWatch.open(self._directory)
        if self._writes is None:
            await trio.sleep(poll)
            return False
        if not self._missed:
            await trio.sleep_until(self._looked + poll)
        with trio.move_on_after(poll if self._woken else IDLE_POLL):
            await self._writes.written()
            return True
        return False

    def _poll_once(self, after: int) -> list[Message] | None:
        """The rows after ``after`` when anyone committed since the last look."""
        if self._watch is None:
            self._watch = connect(self.path, self.timeout)
        version = self._watch.execute("PRAGMA data_version").fetchone()[0]
        if version == self._version:
            return None
        self._version = version
        return messages_after(self._watch, after)

    def _in_thread(
        self, conn: sqlite3.Connection | None, fn: Callable[[Connection], T]
    ) -> tuple[sqlite3.Connection, outcome.Outcome[T]]:
        if conn is None:
            conn = connect(self.path, self.timeout)
        return conn, outcome.capture(fn, conn)


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
