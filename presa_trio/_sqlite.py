"""The SQLite backend: the worker processes of one host share one database file.

The standard library's ``sqlite3`` in WAL mode (readers never wait for the writer), every
call in a worker thread through ``trio.to_thread`` under a bounded limiter, so the event loop
never blocks on the file. Writes take the lock at once (``BEGIN IMMEDIATE``) and wait for it
at most ``busy_timeout``; a statement that fails leaves nothing half written (each write is
one transaction) and is answered as a retryable ``ServiceUnavailable``, never a traceback.

Signals between workers (bus events, a ``tasks/cancel`` or ``tasks/update`` for a task that
runs elsewhere, and the answers to those) are rows of ``presa_messages``. Each worker watches
the file with ``PRAGMA data_version``, which changes when another connection commits: a cheap
read that fetches new rows only when there are any, every ``poll`` seconds (10 ms by default)
while the worker expects signals (a listen stream is open, a task runs there, or it waits for
an answer), once a second otherwise. A signal therefore reaches a worker that expects it
within one poll interval plus one read. Each worker also
renews its row in ``presa_workers`` every quarter of its ``lease``; a worker whose row is
older than the lease is lost, and its tasks are failed by whoever notices first.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar, TypeVar, final

import outcome
import trio

from ._backend import BackendError, Body, BroadcastHandler, CallHandler, new_worker_id
from ._boundary import error_boundary
from .errors import ServiceUnavailable

logger = logging.getLogger("presa_trio.sqlite")

T = TypeVar("T")

SCHEMA_VERSION = 1
BUSY_TIMEOUT = 5.0  # seconds a statement waits for another writer's lock
MESSAGE_RETENTION_MS = 60_000
IDLE_POLL = 1.0  # seconds between looks for signals while this worker expects none
POOL_SIZE = 4

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS presa_meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS presa_workers "
    "(worker_id TEXT PRIMARY KEY, heartbeat_ms INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS presa_messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "origin TEXT NOT NULL, target TEXT, topic TEXT NOT NULL, body TEXT NOT NULL, "
    "created_ms INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS presa_messages_created ON presa_messages (created_ms)",
)


class StorageUnavailable(ServiceUnavailable):
    """The shared database failed (locked past the busy timeout, unwritable, gone): a
    retryable -32603 with HTTP 503 and a message that names no file."""

    def __init__(self) -> None:
        super().__init__("Shared state is unavailable; retry later")


def now_ms() -> int:
    return int(time.time() * 1000)


def connect(path: str, busy_timeout: float = BUSY_TIMEOUT) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, and waits for
    another writer's lock bounded by ``busy_timeout`` seconds."""
    conn = sqlite3.connect(
        path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def migrate(conn: sqlite3.Connection) -> None:
    """Create the backend's tables once; safe when several workers start at once (the
    whole migration is one ``BEGIN IMMEDIATE`` transaction, and every statement is
    idempotent). Refuses a database written by a newer presa_trio."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA:
            conn.execute(statement)
        row = conn.execute("SELECT value FROM presa_meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO presa_meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif int(row[0]) > SCHEMA_VERSION:
            raise BackendError(
                f"the store was written by a newer presa_trio (schema {int(row[0])})"
            )
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
    """A bounded pool of connections to one SQLite file, used from trio.

    ``run(fn)`` calls ``fn(connection)`` in a worker thread (autocommit: each statement its
    own transaction); ``write(fn)`` runs it inside one ``BEGIN IMMEDIATE`` transaction,
    committed if it returns, rolled back if it raises. A database failure (locked past the
    busy timeout, unwritable, gone) raises ``StorageUnavailable``, is logged once per
    episode, and the next call tries a fresh connection: the server recovers by itself.
    """

    def __init__(
        self, path: str, pool_size: int = POOL_SIZE, busy_timeout: float = BUSY_TIMEOUT
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._limiter = trio.CapacityLimiter(pool_size)
        self._idle: list[sqlite3.Connection] = []
        self._failing = False

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` in a worker thread (autocommit: each statement its own
        transaction). A database failure raises ``StorageUnavailable``."""
        async with self._limiter:
            conn = self._idle.pop() if self._idle else None
            try:
                opened, result = await trio.to_thread.run_sync(self._in_thread, conn, fn)
            except sqlite3.Error as exc:  # opening a connection failed
                self._report(exc)
                raise StorageUnavailable() from None
            fault = result.error if isinstance(result, outcome.Error) else None
            if isinstance(fault, sqlite3.Error) or opened.in_transaction:
                opened.close()  # a fresh connection next time: the file may have come back
            else:
                self._idle.append(opened)
        if isinstance(fault, sqlite3.Error):
            self._report(fault)
            raise StorageUnavailable() from None
        if fault is None:
            self._recovered()
        return result.unwrap()

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` inside one ``BEGIN IMMEDIATE`` transaction: all or nothing.
        Once started it runs to its end (a worker thread cannot be interrupted), so a
        cancelled caller never leaves half a change."""

        def transaction(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return await self.run(transaction)

    def _in_thread(
        self, conn: sqlite3.Connection | None, fn: Callable[[sqlite3.Connection], T]
    ) -> tuple[sqlite3.Connection, outcome.Outcome[T]]:
        if conn is None:
            conn = connect(self.path, self.busy_timeout)
        return conn, outcome.capture(fn, conn)

    def _report(self, exc: sqlite3.Error) -> None:
        if not self._failing:
            self._failing = True
            logger.warning("the sqlite store failed (%s); requests that need it get 503", exc)

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            logger.warning("the sqlite store works again")


@final
class SqliteBackend:
    """One run's handle on a shared SQLite file (see the module docstring).

    Open it with ``SqliteBackend.open(path)``; stores built on it run their statements
    through ``db`` (a ``SqliteDatabase``). ``lease`` is how long a worker may go without
    renewing its row before its tasks are failed; ``poll`` how often it looks for signals.
    """

    kind = "sqlite"
    shared = True
    DEFAULT_LEASE: ClassVar[float] = 20.0
    DEFAULT_POLL: ClassVar[float] = 0.01

    def __init__(self, path: str, *, lease: float, poll: float, busy_timeout: float) -> None:
        self.path = path
        self.lease = lease
        self.poll = poll
        self.worker_id = new_worker_id()
        self.db = SqliteDatabase(path, busy_timeout=busy_timeout)
        self._watch: sqlite3.Connection | None = None
        self._version: int | None = None
        self._last_seq = 0
        self._broadcast: dict[str, BroadcastHandler] = {}
        self._calls: dict[str, CallHandler] = {}
        self._replies: dict[str, tuple[trio.Event, list[Body | None]]] = {}
        self._watch_failing = False
        self._attending = 0  # open listen streams, running tasks, calls awaiting answers
        self._attentive_since = 0  # when the current run of attention began (ms)
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ lifetime

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: str,
        *,
        lease: float = DEFAULT_LEASE,
        poll: float = DEFAULT_POLL,
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> AsyncIterator[SqliteBackend]:
        """Open the file, migrate it, join the workers, and watch for signals until the
        block ends; then leave the workers (so this worker's unfinished tasks are failed
        at once rather than after the lease) and close every connection."""
        backend = cls(path, lease=lease, poll=poll, busy_timeout=busy_timeout)
        try:
            await trio.to_thread.run_sync(check_file, path)
            await backend._join()
            async with trio.open_nursery() as nursery:
                backend._nursery = nursery
                nursery.start_soon(backend._watch_loop, name="sqlite signals")
                nursery.start_soon(backend._heartbeat_loop, name="sqlite heartbeat")
                try:
                    yield backend
                finally:
                    nursery.cancel_scope.cancel()
                    backend._nursery = None
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(busy_timeout):
                await backend._leave()
            backend._close()

    async def _join(self) -> None:
        def join(conn: sqlite3.Connection) -> int:
            conn.execute(
                "INSERT OR REPLACE INTO presa_workers (worker_id, heartbeat_ms) VALUES (?, ?)",
                (self.worker_id, now_ms()),
            )
            row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM presa_messages").fetchone()
            return int(row[0])

        self._last_seq = await self.db.write(join)

    async def _leave(self) -> None:
        def leave(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM presa_workers WHERE worker_id = ?", (self.worker_id,))

        with error_boundary("leaving the sqlite store", logger):
            await self.db.write(leave)

    def _close(self) -> None:
        self.db.close()
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    # ------------------------------------------------------------------ shared key

    async def shared_key(self) -> bytes | None:
        """The ``requestState`` key of every worker: made by the first, kept in the file."""

        def key(conn: sqlite3.Connection) -> bytes:
            conn.execute(
                "INSERT OR IGNORE INTO presa_meta (key, value) VALUES ('state_key', ?)",
                (secrets.token_bytes(32),),
            )
            row = conn.execute("SELECT value FROM presa_meta WHERE key = 'state_key'").fetchone()
            return bytes(row[0])

        return await self.db.write(key)

    # ------------------------------------------------------------------ signals

    def on_broadcast(self, topic: str, handler: BroadcastHandler) -> None:
        self._broadcast[topic] = handler

    def on_call(self, topic: str, handler: CallHandler) -> None:
        self._calls[topic] = handler

    async def broadcast(self, topic: str, body: Body) -> None:
        await self._send(None, topic, body)

    async def call(self, worker_id: str, topic: str, body: Body) -> Body | None:
        call_id = secrets.token_hex(8)
        arrived = trio.Event()
        box: list[Body | None] = []
        self._replies[call_id] = (arrived, box)
        try:
            with self.attention():
                await self._send(worker_id, topic, {"id": call_id, "body": body})
                await arrived.wait()
        finally:
            del self._replies[call_id]
        return box[0]

    async def _send(self, target: str | None, topic: str, body: Body) -> None:
        text = json.dumps(body, separators=(",", ":"))

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO presa_messages (origin, target, topic, body, created_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                (self.worker_id, target, topic, text, now_ms()),
            )

        await self.db.run(insert)

    @contextlib.contextmanager
    def attention(self) -> Iterator[None]:
        if not self._attending:
            self._attentive_since = now_ms()
            self._wake.set()
        self._attending += 1
        try:
            yield
        finally:
            self._attending -= 1

    async def _watch_loop(self) -> None:
        """Look for signals every ``poll`` seconds while this worker expects them, every
        ``IDLE_POLL`` seconds otherwise (each look is a thread hop: cheap, not free)."""
        while True:
            if self._attending:
                await trio.sleep(self.poll)
            else:
                self._wake = trio.Event()
                with trio.move_on_after(IDLE_POLL):
                    await self._wake.wait()
            try:
                messages = await trio.to_thread.run_sync(self._poll_once)
            except sqlite3.Error as exc:
                if not self._watch_failing:
                    self._watch_failing = True
                    logger.warning("watching the sqlite store for signals failed (%s)", exc)
                if self._watch is not None:
                    self._watch.close()
                    self._watch = None
                continue
            self._watch_failing = False
            for origin, target, topic, text, created in messages:
                if target is None and created < self._attentive_since:
                    continue  # news from before anyone here listened: not theirs
                with error_boundary(f"the {topic} signal from worker {origin}", logger):
                    self._dispatch(origin, target, topic, json.loads(text))

    def _poll_once(self) -> list[tuple[str, str | None, str, str, int]]:
        """New messages for this worker, when anyone committed since the last look."""
        if self._watch is None:
            self._watch = connect(self.path, self.db.busy_timeout)
        version = self._watch.execute("PRAGMA data_version").fetchone()[0]
        if version == self._version:
            return []
        self._version = version
        rows = self._watch.execute(
            "SELECT seq, origin, target, topic, body, created_ms FROM presa_messages "
            "WHERE seq > ? "
            "ORDER BY seq",
            (self._last_seq,),
        ).fetchall()
        if rows:
            self._last_seq = rows[-1][0]
        return [
            (origin, target, topic, body, created)
            for _, origin, target, topic, body, created in rows
            if origin != self.worker_id and target in (None, self.worker_id)
        ]

    def _dispatch(self, origin: str, target: str | None, topic: str, body: Any) -> None:
        if topic == "reply":
            waiting = self._replies.get(body["id"])
            if waiting is not None and not waiting[0].is_set():
                waiting[1].append(body.get("body"))
                waiting[0].set()
            return
        if target is None:
            handler = self._broadcast.get(topic)
            if handler is not None:
                handler(body)
            return
        answer = self._calls.get(topic)
        if answer is not None and self._nursery is not None:
            self._nursery.start_soon(self._answer, answer, origin, body, name=f"answer {topic}")

    async def _answer(self, handler: CallHandler, origin: str, call: Any) -> None:
        reply: Body | None = None
        with error_boundary("answering another worker", logger):
            reply = await handler(call["body"])
        # A database failure was reported by ``run``; the caller's bound decides.
        with (
            error_boundary("replying to another worker", logger),
            contextlib.suppress(StorageUnavailable),
        ):
            await self._send(origin, "reply", {"id": call["id"], "body": reply})

    # ------------------------------------------------------------------ liveness

    async def _heartbeat_loop(self) -> None:
        while True:
            await trio.sleep(self.lease / 4)
            with contextlib.suppress(StorageUnavailable):  # reported once by ``run``
                await self.db.write(self._beat)

    def _beat(self, conn: sqlite3.Connection) -> None:
        now = now_ms()
        conn.execute(
            "INSERT OR REPLACE INTO presa_workers (worker_id, heartbeat_ms) VALUES (?, ?)",
            (self.worker_id, now),
        )
        conn.execute(
            "DELETE FROM presa_messages WHERE created_ms < ?", (now - MESSAGE_RETENTION_MS,)
        )
