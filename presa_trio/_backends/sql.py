"""The shared backend: what the workers of one server share, on a SQL database.

One implementation over any ``SqlDatabase`` (SQLite for one host, PostgreSQL for many):

- **signals** between workers (bus events; a ``tasks/cancel`` or ``tasks/update`` for a task
  another worker runs; the answers to those) are rows of ``presa_messages``, inserted in
  order (every write is serialised by the database). The rows are the truth: a worker reads
  every row after the last one it saw, so a wake-up that goes missing (a dropped
  connection) delays a signal, never loses it. How a worker learns that there are new rows
  is the database's business (``SqlDatabase.changes``);
- **leases** (``WorkerLeases``): each worker renews its row in ``presa_workers`` every
  quarter of ``lease``; a worker whose row is older, by the database's clock, is lost, and
  the Tasks extension fails its tasks;
- **the requestState key**, made once by the first worker and kept in ``presa_meta``.

Both background loops (signals, heartbeats) sit behind an error boundary: an iteration
that fails is logged (a traceback once per episode for an error the database did not
report itself) and tried again after a delay that doubles up to ``MAX_BACKOFF``; the run
stays up, and ``health()`` says which loop fails until it works again. Cancellation passes
through. What this module does not do: restart a database, or decide that a worker whose
store fails should stop (that is the process owner's call, which ``health()`` informs).

Every statement uses ``?`` placeholders and SQL both databases understand; a database
translates what it must.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar, final, runtime_checkable

import trio

from .._boundary import absorb, error_boundary, partition, single
from ..errors import ServiceUnavailable
from .protocol import (
    HEALTHY,
    BackendError,
    BackendHealth,
    Body,
    BroadcastHandler,
    CallHandler,
    new_worker_id,
)

logger = logging.getLogger("presa_trio.backend")

T = TypeVar("T")

MESSAGE_RETENTION_MS = 60_000
IDLE_POLL = 1.0  # seconds between looks for signals while this worker expects none
DEFAULT_LEASE = 20.0
MAX_BACKOFF = 2.0  # seconds: the longest wait before a failing background loop tries again

#: (seq, origin, target, topic, body, created_ms) of one message row.
Message = tuple[int, str, str | None, str, str, int]


class StorageUnavailable(ServiceUnavailable):
    """The shared database failed (locked or unreachable past its timeout, unwritable,
    gone): a retryable -32603 with HTTP 503 and a message that names no file or host.
    ``reason`` says why for the operator (``Backend.health()``), never on the wire."""

    def __init__(self, reason: str = "the store failed") -> None:
        super().__init__("Shared state is unavailable; retry later")
        self.reason = reason


@final
class Health:
    """A database's failures, logged once per episode: the first failure, then the first
    success after it (``kind`` names the database; the detail never names a file or host
    beyond what the driver's message says)."""

    __slots__ = ("_failing", "_kind", "_log")

    def __init__(self, kind: str, log: logging.Logger) -> None:
        self._kind = kind
        self._log = log
        self._failing = False

    def failed(self, detail: str) -> None:
        if not self._failing:
            self._failing = True
            self._log.warning(
                "the %s store failed (%s); requests that need it get 503", self._kind, detail
            )

    def worked(self) -> None:
        if self._failing:
            self._failing = False
            self._log.warning("the %s store works again", self._kind)


@final
class Retry:
    """One background loop's failures: the first of an episode logged, each retried after a
    delay that doubles from ``first`` to ``most``, a success resetting both.

    A ``StorageUnavailable`` was logged by the database that raised it (once per episode,
    without a traceback); any other error is unexpected here and logged with its traceback.
    Cancellation, and whatever else belongs to the process, is re-raised (``partition``).
    """

    __slots__ = ("_delay", "_first", "_most", "_unexpected", "failing", "what")

    def __init__(self, what: str, first: float, most: float) -> None:
        self.what = what
        self._first = self._delay = min(first, most)
        self._most = most
        self._unexpected = False  # the current episode logged a traceback
        #: Why the last iteration failed (None: it worked).
        self.failing: str | None = None

    def failed(self, exc: BaseException) -> float:
        """Record ``exc`` (re-raised if it holds cancellation); how long to wait before the
        next try."""
        others, errors = partition(exc)
        if others is not None:
            absorb(exc, self.what, logger)  # logs the errors beside it, re-raises the rest
        error = single(errors) if errors is not None else exc
        if isinstance(error, StorageUnavailable):
            self.failing = error.reason
        else:
            self.failing = f"{type(error).__name__} (see the log)"
            if not self._unexpected:
                self._unexpected = True
                logger.error(
                    "the %s failed; it tries again, waiting at most %.3g s",
                    self.what,
                    self._most,
                    exc_info=errors,
                )
        delay = self._delay
        self._delay = min(2 * self._delay, self._most)
        return delay

    def worked(self) -> None:
        if self._unexpected:
            logger.warning("the %s works again", self.what)
        self._unexpected = False
        self.failing = None
        self._delay = self._first


def record_schema_version(conn: Connection, version: int) -> None:
    """Inside a migration: record ``version`` the first time, and refuse a database that a
    newer presa_trio wrote."""
    row = conn.execute("SELECT value FROM presa_meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO presa_meta (key, value) VALUES ('schema_version', ?)", (str(version),)
        )
    elif int(row[0]) > version:
        raise BackendError(f"the store was written by a newer presa_trio (schema {int(row[0])})")


def in_transaction(
    begin: Sequence[str], fn: Callable[[Connection], T]
) -> Callable[[Connection], T]:
    """``fn`` as one transaction that the statements ``begin`` open: committed if ``fn``
    returns, rolled back if it raises (``SqlDatabase.write`` of both databases)."""

    def transaction(conn: Connection) -> T:
        for statement in begin:
            conn.execute(statement)
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    return transaction


@final
class Tables:
    """The tables a store keeps on a ``SqlDatabase``, created (``CREATE ... IF NOT EXISTS``
    statements, in one serialised write) the first time the store uses the database."""

    __slots__ = ("_ready", "_statements")

    def __init__(self, statements: Sequence[str]) -> None:
        self._statements = tuple(statements)
        self._ready = False

    async def ensure(self, db: SqlDatabase) -> None:
        """Make sure the tables exist (one write the first time, none after)."""
        if self._ready:
            await trio.lowlevel.checkpoint()
            return

        def create(conn: Connection) -> None:
            for statement in self._statements:
                conn.execute(statement)

        await db.write(create)
        self._ready = True


def messages_after(conn: Connection, after: int) -> list[Message]:
    """The message rows after number ``after``, in order (what ``SqlDatabase.changes``
    returns once it has looked)."""
    rows = conn.execute(
        "SELECT seq, origin, target, topic, body, created_ms FROM presa_messages "
        "WHERE seq > ? ORDER BY seq",
        (after,),
    ).fetchall()
    return [tuple(row) for row in rows]


def now_ms() -> int:
    return int(time.time() * 1000)


class Connection(Protocol):
    """What statements run on: ``execute(sql, params)`` with ``?`` placeholders, returning
    a cursor with ``fetchone``, ``fetchall`` and ``rowcount``."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...


@final
class Select:
    """One ``SELECT`` and its parameters, called on a connection for its rows: a read that a
    database may send together with others (``SqlDatabase.select``)."""

    __slots__ = ("parameters", "sql")

    def __init__(self, sql: str, parameters: Sequence[Any] = ()) -> None:
        self.sql = sql
        self.parameters = parameters

    def __call__(self, conn: Connection) -> list[Any]:
        return list(conn.execute(self.sql, self.parameters).fetchall())


class SqlDatabase(Protocol):
    """A database the shared backend and the stores built on it run their statements on.

    ``run(fn)`` calls ``fn(connection)`` in a worker thread, one statement one transaction;
    ``write(fn)`` runs it as one transaction, serialised with every other write (so limits
    counted in it hold), committed if it returns, rolled back if it raises. On PostgreSQL a
    write's statements are pipelined: a statement that fails raises when a result is next
    read, or when ``fn`` returns, rather than from its ``execute``. A message row is
    appended with the one statement ``append``. A database failure raises
    ``StorageUnavailable``.
    """

    kind: str
    timeout: float
    #: SQL for the database's own clock in epoch milliseconds: leases are judged on one
    #: clock, whatever the clocks of the hosts that write them.
    clock: str

    async def run(self, fn: Callable[[Connection], T]) -> T: ...

    async def write(self, fn: Callable[[Connection], T]) -> T: ...

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """``run(fn)`` for an ``fn`` that only reads: a database may run it with other
        reads (SQLite's reader), never behind a write."""

    async def select(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        """The rows of one ``SELECT``: ``read`` of it, which a database may send together
        with the other reads queued (PostgreSQL's reader: one round trip for all)."""

    async def update(self, fn: Callable[[Connection], Any]) -> int:
        """``fn``'s one statement that writes (``fn`` returns its cursor), its own
        transaction or committed with the writes queued with it, and the count of rows it
        changed. Not serialised with ``write`` where that costs nothing (PostgreSQL's
        writer commits it with the writes it has; SQLite's, with the others)."""

    #: One statement that appends a message row (``?`` for origin, target, topic, body and
    #: created_ms) as a transaction of its own, serialised with every write (so rows commit
    #: in the order of their numbers), and wakes the other workers if the database can
    #: (if not, they find it when they next look).
    append: str

    async def changes(
        self, after: int, attentive: bool, poll: float, wake: trio.Event, own: str = ""
    ) -> list[Message] | None:
        """Wait until there may be new messages, then the rows after ``after`` (None: none
        are new). ``attentive``: this worker expects signals now, look every ``poll``
        seconds if nothing tells you sooner; otherwise ``IDLE_POLL``, or until ``wake``.
        ``own`` is this worker's id: a database that tells who wrote may skip reading what
        only this worker did, but never for longer than ``IDLE_POLL``."""

    async def aclose(self) -> None: ...

    async def serve(self, *, task_status: trio.TaskStatus[None] = ...) -> None:
        """Whatever the database runs in the background for its calls while the backend is
        open (SQLite's writer and reader), until cancelled; ``task_status.started()`` once calls may
        use it. A database with nothing to run returns after that."""


@runtime_checkable
class SqlBacked(Protocol):
    """A backend whose workers share a SQL database: what it shares, and what the stores
    built on it keep (``presa_trio.ext.tasks`` its tasks), is in ``db``."""

    db: SqlDatabase


@final
class SharedBackend:
    """One run's handle on a shared database (see the module docstring). Made by
    ``presa_trio.backends.open_backend``; stores reach the database as ``db``."""

    shared = True

    def __init__(self, db: SqlDatabase, *, lease: float, poll: float) -> None:
        self.db = db
        self.kind = db.kind
        self.lease = lease
        self.poll = poll
        self.worker_id = new_worker_id()
        self._last_seq = 0
        self._broadcast: dict[str, BroadcastHandler] = {}
        self._calls: dict[str, CallHandler] = {}
        self._replies: dict[str, tuple[trio.Event, list[Body | None]]] = {}
        self._attending = 0  # open listen streams, running tasks, calls awaiting answers
        self._attentive_since = 0  # when the current run of attention began (ms)
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None
        # Since when this worker's heartbeats have all succeeded (None: the last failed).
        self._healthy_since: float | None = None
        self._beats = Retry(f"{db.kind} heartbeat", poll, min(MAX_BACKOFF, lease / 4))
        self._signals = Retry(f"{db.kind} signal loop", poll, MAX_BACKOFF)

    @property
    def judges_leases(self) -> bool:
        """Whether this worker may declare others lost: only after its own heartbeats
        have succeeded for a whole lease. After an outage of the database every lease
        looks lapsed; waiting a lease gives every living worker time to renew its own."""
        since = self._healthy_since
        return since is not None and trio.current_time() - since >= self.lease

    async def live_workers(self) -> frozenset[str]:
        """The workers whose lease holds: renewed within ``lease``, by the database's clock
        (``WorkerLeases``)."""
        query = f"SELECT worker_id FROM presa_workers WHERE heartbeat_ms >= {self.db.clock} - ?"
        lease_ms = int(self.lease * 1000)

        return frozenset(str(row[0]) for row in await self.db.select(query, (lease_ms,)))

    def health(self) -> BackendHealth:
        """Unhealthy while the heartbeat or the signal loop fails (the reason names which,
        and why), healthy again once it has succeeded."""
        for loop in (self._beats, self._signals):
            if loop.failing is not None:
                return BackendHealth(False, f"the {loop.what} fails: {loop.failing}")
        return HEALTHY

    # ------------------------------------------------------------------ lifetime

    @classmethod
    @asynccontextmanager
    async def open(
        cls, db: SqlDatabase, *, lease: float = DEFAULT_LEASE, poll: float = 0.01
    ) -> AsyncIterator[SharedBackend]:
        """Join the workers and watch for signals until the block ends; then leave (so this
        worker's unfinished tasks are failed at once rather than after the lease) and close
        the database. ``db`` is open and migrated already."""
        backend = cls(db, lease=lease, poll=poll)
        try:
            await backend._join()
            async with trio.open_nursery() as nursery:
                backend._nursery = nursery
                await nursery.start(db.serve)
                nursery.start_soon(backend._watch_loop, name=f"{db.kind} signals")
                nursery.start_soon(backend._heartbeat_loop, name=f"{db.kind} heartbeat")
                try:
                    yield backend
                finally:
                    nursery.cancel_scope.cancel()
                    backend._nursery = None
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(db.timeout):
                await backend._leave()
            with trio.CancelScope(shield=True), trio.move_on_after(db.timeout):
                await db.aclose()

    async def _join(self) -> None:
        def join(conn: Connection) -> int:
            self._beat(conn)
            row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM presa_messages").fetchone()
            return int(row[0])

        self._last_seq = await self.db.write(join)
        self._healthy_since = trio.current_time()

    async def _leave(self) -> None:
        def leave(conn: Connection) -> None:
            conn.execute("DELETE FROM presa_workers WHERE worker_id = ?", (self.worker_id,))

        await trio.lowlevel.checkpoint()
        # A database that is down was reported; the lease will lapse instead.
        with (
            error_boundary("leaving the shared store", logger),
            contextlib.suppress(StorageUnavailable),
        ):
            await self.db.write(leave)

    # ------------------------------------------------------------------ shared key

    async def shared_key(self) -> bytes | None:
        """The ``requestState`` key of every worker: made by the first, kept in the store."""

        def key(conn: Connection) -> bytes:
            conn.execute(
                "INSERT INTO presa_meta (key, value) VALUES ('state_key', ?) "
                "ON CONFLICT (key) DO NOTHING",
                (secrets.token_hex(32),),
            )
            row = conn.execute("SELECT value FROM presa_meta WHERE key = 'state_key'").fetchone()
            return bytes.fromhex(str(row[0]))

        return await self.db.write(key)

    # ------------------------------------------------------------------ signals

    def on_broadcast(self, topic: str, handler: BroadcastHandler) -> None:
        self._broadcast[topic] = handler

    def on_call(self, topic: str, handler: CallHandler) -> None:
        self._calls[topic] = handler

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

        def append(conn: Connection) -> Any:
            return conn.execute(self.db.append, (self.worker_id, target, topic, text, now_ms()))

        # one statement that writes: on SQLite committed with the writes queued with it (a
        # task's completion and the notification relayed for it may share one COMMIT)
        await self.db.update(append)

    async def _watch_loop(self) -> None:
        """Read new messages whenever the database says there may be some. A look that
        fails is tried again after a backoff (``Retry``); the rows are the truth, so the
        signals sent meanwhile are read then."""
        while True:
            if not self._attending:
                self._wake = trio.Event()
            try:
                rows = await self.db.changes(
                    self._last_seq, bool(self._attending), self.poll, self._wake, self.worker_id
                )
            except BaseException as exc:  # cancellation is re-raised by ``failed``
                await trio.sleep(self._signals.failed(exc))
                continue
            self._signals.worked()
            if not rows:
                continue
            self._last_seq = rows[-1][0]
            for _, origin, target, topic, text, created in rows:
                if origin == self.worker_id or target not in (None, self.worker_id):
                    continue
                if target is None and created < self._attentive_since:
                    continue  # news from before anyone here listened: not theirs
                with error_boundary(f"the {topic} signal from worker {origin}", logger):
                    self._dispatch(origin, target, topic, json.loads(text))

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
        # A database failure was reported where it happened; the caller's bound decides.
        with (
            error_boundary("replying to another worker", logger),
            contextlib.suppress(StorageUnavailable),
        ):
            await self._send(origin, "reply", {"id": call["id"], "body": reply})

    # ------------------------------------------------------------------ liveness

    async def _heartbeat_loop(self) -> None:
        """Renew this worker's lease every quarter of it; a renewal that fails is tried
        again sooner, after a backoff (``Retry``), never later than the next renewal."""
        delay = self.lease / 4
        while True:
            await trio.sleep(delay)
            try:
                await self.db.write(self._beat)
            except BaseException as exc:  # cancellation is re-raised by ``failed``
                self._healthy_since = None
                delay = self._beats.failed(exc)
                continue
            self._beats.worked()
            delay = self.lease / 4
            if self._healthy_since is None:
                self._healthy_since = trio.current_time()

    def _beat(self, conn: Connection) -> None:
        clock = self.db.clock
        conn.execute(
            f"INSERT INTO presa_workers (worker_id, heartbeat_ms) VALUES (?, {clock}) "
            "ON CONFLICT (worker_id) DO UPDATE SET heartbeat_ms = excluded.heartbeat_ms",
            (self.worker_id,),
        )
        conn.execute(
            "DELETE FROM presa_messages WHERE created_ms < ?",
            (now_ms() - MESSAGE_RETENTION_MS,),
        )
