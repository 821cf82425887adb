"""PostgreSQL under the shared backend: instances on many hosts are one server.

psycopg 3 with psycopg-pool, used synchronously in worker threads through ``trio.to_thread``
under a bounded limiter (psycopg's async API is asyncio's; no bridge is brought in), so the
event loop never waits on the network. Every connection carries ``statement_timeout`` and
``lock_timeout``, so a statement that hangs is bounded; a connection the database has closed
is never lent (``_lend``), so after the database comes back the pool reconnects by itself.

While the backend is open, one writer task per worker (``PostgresDatabase.serve``) takes its
writes: what is queued when a lane is free goes to a thread in one hop, on that lane's
long-lived connection, in one transaction (group commit) that takes the write lock once, each
write in a savepoint of its own, none acknowledged before the ``COMMIT``. Where libpq allows,
the batch is pipelined: it all goes out at once and is answered in one round trip. An updater
does the same for the one-statement writes (a task's change, its completion, a message row),
without the write lock, so they never wait for creations; a reader for the reads (the
``SELECT``s of a batch answered in one round trip). The writer and the reader have ``LANES``
lanes: while one batch waits on the database, the next is on its way. Other calls (``run``)
keep the pool.

Writes are serialised with a transaction-level advisory lock, as SQLite serialises them:
limits counted in a write hold, and message rows, each appended by one statement that takes
the lock, commit in the order of their numbers. Signals wake the other instances with
``NOTIFY`` (``pg_notify`` in that statement); each instance ``LISTEN``s on a connection
of its own and reads the message rows after the last one it saw whenever it is woken, and at
least once a second. The rows are the truth: a notification lost with a dropped connection
delays a signal by that second at most, and an instance that reconnects catches up.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar, final

import outcome
import psycopg
import trio
from psycopg import conninfo
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from .batches import Batcher, Job
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

logger = logging.getLogger("presa_trio.postgres")

T = TypeVar("T")

SCHEMA_VERSION = 1
POOL_SIZE = 4
LANES = 2  # batches of writes, and of reads, in flight at once (each lane a connection)
CHANNEL = "presa_signals"
WRITE_LOCK = 0x70726573_61000001  # advisory lock keys: every write, and the migration
MIGRATION_LOCK = 0x70726573_61000002

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS presa_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS presa_workers "
    "(worker_id TEXT PRIMARY KEY, heartbeat_ms BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS presa_messages (seq BIGSERIAL PRIMARY KEY, "
    "origin TEXT NOT NULL, target TEXT, topic TEXT NOT NULL, body TEXT NOT NULL, "
    "created_ms BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS presa_messages_created ON presa_messages (created_ms)",
)

# A write's transaction begins with the write lock taken. A write runs in psycopg's
# pipeline mode: statements go out without waiting for each one's answer, and a round trip
# is made only where a result is read and once at the end, for the rest (a creation: the
# lock with the counts it reads, then the insert, the total and COMMIT).
_BEGIN_WRITE = ("BEGIN", f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")

# A message row in one statement, one round trip: the write lock taken before the row's
# number is drawn (so rows commit in the order of their numbers), and the notification,
# which PostgreSQL sends as the statement's transaction commits, naming the worker that
# wrote (which has no need to read it back).
_APPEND = (
    f"WITH locked AS (SELECT pg_advisory_xact_lock({WRITE_LOCK})), "
    "appended AS (INSERT INTO presa_messages (origin, target, topic, body, created_ms) "
    "SELECT ?, ?, ?, ?, ? FROM locked RETURNING origin) "
    f"SELECT pg_notify('{CHANNEL}', origin) FROM appended"
)

#: What a lost, unreachable or overloaded database raises (anything else is a bug).
FAULTS = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)


def display(url: str) -> str:
    """``url`` fit for a log line: user, host, port and database, never a password."""
    try:
        info = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(an unreadable URL)"
    user = f"{info['user']}@" if info.get("user") else ""
    host = info.get("host") or "localhost"
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{host}{port}/{info.get('dbname') or ''}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def connection_options(timeout: float) -> dict[str, Any]:
    ms = int(timeout * 1000)
    return {
        "autocommit": True,
        "connect_timeout": max(1, round(timeout)),
        "options": f"-c statement_timeout={ms} -c lock_timeout={ms}",
    }


def migrate(conn: psycopg.Connection[Any]) -> None:
    """Create the backend's tables once, under an advisory lock: safe when several
    instances start at once. Records the schema version; refuses a newer one."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        for statement in _SCHEMA:
            conn.execute(statement)
        record_schema_version(_Statements(conn), SCHEMA_VERSION)


def check_database(url: str, timeout: float) -> None:
    """Connect to ``url`` and migrate it, or raise a one-line ``BackendError`` that names
    the database without its password."""
    try:
        with psycopg.connect(url, **connection_options(timeout)) as conn:
            migrate(conn)
    except psycopg.Error as exc:
        raise BackendError(
            f"cannot use the postgresql store {display(url)}: {_first_line(exc)}"
        ) from None


@final
class _Statements:
    """A psycopg connection seen through the ``Connection`` protocol (``?`` placeholders)."""

    __slots__ = ("_conn", "_pipeline")

    def __init__(
        self, conn: psycopg.Connection[Any], pipeline: psycopg.Pipeline | None = None
    ) -> None:
        self._conn = conn
        self._pipeline = pipeline

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        cursor = self._conn.execute(sql.replace("?", "%s"), parameters)
        return cursor if self._pipeline is None else _Pending(cursor, self._pipeline)


@final
class _Pending:
    """A pipelined statement's cursor. Reading its rows sends what is queued and waits for
    them (psycopg does); its ``rowcount`` is known once the pipeline has synced."""

    __slots__ = ("_cursor", "_pipeline")

    def __init__(self, cursor: psycopg.Cursor[Any], pipeline: psycopg.Pipeline) -> None:
        self._cursor = cursor
        self._pipeline = pipeline

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        self._pipeline.sync()
        return self._cursor.rowcount


def _one_by_one(conn: psycopg.Connection[Any], fn: Callable[[Connection], T]) -> T:
    """``fn`` on ``conn``, each statement waiting for its answer."""
    return fn(_Statements(conn))


def _in_pipeline(conn: psycopg.Connection[Any], fn: Callable[[Connection], T]) -> T:
    """``fn`` on ``conn`` in pipeline mode. Once a statement fails, PostgreSQL skips the
    rest of the pipeline, the ``ROLLBACK`` that ``in_transaction`` sends after it too: the
    failed transaction is rolled back here, before the connection goes back to the pool.
    The error reported is the statement's (a connection that fails to roll back is broken,
    and the pool drops it)."""
    try:
        with conn.pipeline() as pipeline:
            return fn(_Statements(conn, pipeline))
    except BaseException:
        if conn.info.transaction_status == TransactionStatus.INERROR:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
        raise


@final
class _Changed:
    """What an ``update`` call gives back in a batch: its statement's cursor, whose count
    of rows changed is read once the batch's answers are in (no round trip of its own)."""

    __slots__ = ("cursor",)

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    def rows(self) -> int:
        cursor = self.cursor
        return int((cursor._cursor if isinstance(cursor, _Pending) else cursor).rowcount)


def _all_at_once(
    conn: psycopg.Connection[Any], batch: list[Job], begin: Sequence[str]
) -> list[outcome.Outcome[Any]]:
    """The batch in one pipeline, one sync at its end: raises ``psycopg.Error`` if any
    statement failed (nothing committed)."""
    results: list[outcome.Outcome[Any]] = []
    with conn.pipeline() as pipeline:
        statements = _Statements(conn, pipeline)
        for statement in begin:
            conn.execute(statement)
        for job in batch:
            conn.execute("SAVEPOINT presa_write")
            try:
                value = job.fn(statements)
            except psycopg.Error:
                raise
            except Exception as exc:
                results.append(outcome.Error(exc))
                conn.execute("ROLLBACK TO presa_write")
            else:
                results.append(outcome.Value(value))
            conn.execute("RELEASE presa_write")
        conn.execute("COMMIT")
        pipeline.sync()
    return [_rows_read(result) for result in results]


def _each_answered(
    conn: psycopg.Connection[Any], batch: list[Job], begin: Sequence[str], *, pipelined: bool
) -> list[outcome.Outcome[Any]]:
    """The batch in one transaction, each call synced at its end (pipelined) or each
    statement waiting for its answer: a call whose statement fails is told so, alone."""
    results: list[outcome.Outcome[Any]] = []
    with contextlib.ExitStack() as stack:
        pipeline = stack.enter_context(conn.pipeline()) if pipelined else None
        statements = _Statements(conn, pipeline)
        for statement in begin:
            conn.execute(statement)
        for job in batch:
            conn.execute("SAVEPOINT presa_write")
            try:
                value = job.fn(statements)
                conn.execute("RELEASE presa_write")
                if pipeline is not None:
                    pipeline.sync()
            except FAULTS:
                raise
            except Exception as exc:
                results.append(outcome.Error(exc))
                if pipeline is not None:
                    with contextlib.suppress(psycopg.Error):
                        pipeline.sync()  # what was queued, up to the failure, is answered
                conn.execute("ROLLBACK TO presa_write")
                conn.execute("RELEASE presa_write")
                if pipeline is not None:
                    pipeline.sync()  # a transaction that cannot go on fails the batch here
            else:
                results.append(_rows_read(outcome.Value(value)))
        conn.execute("COMMIT")
    return results


def _select_together(conn: psycopg.Connection[Any], selects: list[Job]) -> bool:
    """The rows of each ``Select`` in ``selects``, sent in one pipeline and answered in one
    round trip (one implicit transaction: one snapshot for all). False if one failed:
    then none is answered here (a read may run again)."""
    try:
        with conn.pipeline() as pipeline:
            cursors = []
            for job in selects:
                query = job.fn
                assert isinstance(query, Select)
                cursors.append(conn.execute(query.sql.replace("?", "%s"), query.parameters))
            pipeline.sync()
            rows = [cursor.fetchall() for cursor in cursors]
    except psycopg.Error:
        return False
    for job, found in zip(selects, rows, strict=True):
        job.result = outcome.Value(found)
    return True


def _rows_read(result: outcome.Outcome[Any]) -> outcome.Outcome[Any]:
    """``result``, an ``update``'s cursor replaced by the count of rows it changed."""
    if isinstance(result, outcome.Value) and isinstance(result.value, _Changed):
        return outcome.Value(result.value.rows())
    return result


@final
class PostgresDatabase:
    """A bounded pool of connections to one PostgreSQL database, used from trio (a
    ``SqlDatabase``). A lost database raises ``StorageUnavailable`` (logged once per
    episode); the next call gets a checked, fresh connection."""

    kind = "postgresql"
    append = _APPEND
    clock = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"

    def __init__(self, url: str, timeout: float, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        self.timeout = timeout
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            open=False,
            kwargs=connection_options(timeout),
            timeout=timeout,
            # psycopg-pool retries a failed connection with a doubling delay until this
            # much time has passed, then starts again from a second at the next demand:
            # a short bound keeps a database that came back from waiting on the backoff
            reconnect_timeout=max(2 * timeout, 5.0),
            name="presa_trio",
        )
        self._limiter = trio.CapacityLimiter(pool_size)
        # pipeline mode needs libpq 14 or later (psycopg[binary] brings its own; a system
        # libpq may be older): without it a write waits for each statement's answer
        self._pipelined = psycopg.Pipeline.is_supported()
        self._health = Health("postgresql", logger)
        self._listener: psycopg.Connection[Any] | None = None
        self._listening = threading.Lock()  # guards the three below, shared with _wait
        self._waiting = False
        self._closed = False
        self._opening = trio.Lock()
        self._opened = False
        self._read = float("-inf")  # when ``_wait`` last read the message rows (monotonic)
        # The writer and the reader while they run (``serve``); else each call uses the pool.
        self._writing = Batcher("the postgresql writer", self._writes_in_thread, logger,
                                self._batched, lanes=LANES)  # fmt: skip
        self._updating = Batcher("the postgresql updater", self._updates_in_thread, logger,
                                 self._batched, lanes=LANES)  # fmt: skip
        self._reading = Batcher("the postgresql reader", self._reads_in_thread, logger,
                                self._batched, lanes=LANES)  # fmt: skip
        # each lane's own connection (None until its first batch, or after it was lost)
        self._writers: list[psycopg.Connection[Any] | None] = [None] * LANES
        self._updaters: list[psycopg.Connection[Any] | None] = [None] * LANES
        self._readers: list[psycopg.Connection[Any] | None] = [None] * LANES
        #: Counts of this database's work, for benchmarks and tests (None: not counted).
        self.tally: Tally | None = None

    async def open(self) -> None:
        """Open the pool (at once; ``run`` opens it on first use otherwise), or raise
        ``BackendError`` when the database cannot be reached within ``timeout``."""
        async with self._opening:
            if not self._opened:
                await self._open()
                self._opened = True

    async def _open(self) -> None:
        try:
            await trio.to_thread.run_sync(partial(self.pool.open, wait=True, timeout=self.timeout))
        except PoolTimeout:
            self.pool.close(timeout=0)
            raise BackendError(f"cannot reach the postgresql store {display(self.url)}") from None

    async def aclose(self) -> None:
        with self._listening:
            self._closed = True
            if not self._waiting and self._listener is not None:
                self._listener.close()  # no thread is in it; one that is closes it itself
        await trio.to_thread.run_sync(partial(self.pool.close, timeout=self.timeout))

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run this worker's writer and reader until cancelled (see the module docstring).
        When they stop, what is queued is answered ``StorageUnavailable`` and later calls
        use the pool again."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._writing.serve)
                await nursery.start(self._updating.serve)
                await nursery.start(self._reading.serve)
                task_status.started()
        finally:
            # no batch is in a thread now: a batcher waits for its thread before it stops
            for conns in (self._writers, self._updaters, self._readers):
                for lane, conn in enumerate(conns):
                    if conn is not None:
                        conn.close()
                    conns[lane] = None

    async def run(self, fn: Callable[[Connection], T]) -> T:
        if self.tally is not None:
            fn = self.tally.counting(fn)
        return await self._on_connection(partial(_one_by_one, fn=fn))

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """``fn``, which only reads: while the reader runs, on its connection in a batch with
        the other reads queued (one thread hop for all); otherwise as ``run`` runs it."""
        if self._reading.serving:
            call = fn if self.tally is None else self.tally.counting(fn)
            handed = await self._reading.hand(call)
            if handed is not None:
                return self._answer(handed)
        return await self.run(fn)

    async def select(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        """The rows of one ``SELECT``: while the reader runs, sent with the other reads
        queued, all answered in one round trip; otherwise as ``run`` runs it."""
        query = Select(sql, parameters)
        if self._reading.serving:
            if self.tally is not None:
                self.tally.selected()
            handed: outcome.Outcome[list[Any]] | None = await self._reading.hand(query)
            if handed is not None:
                return self._answer(handed)
        return await self.run(query)

    async def update(self, fn: Callable[[Connection], Any]) -> int:
        """``fn``'s one statement that writes, and the count of rows it changed: while the
        updater runs, committed with the other updates it has (one transaction, and one
        round trip, for all; not behind the write lock); otherwise as ``run`` runs it, its
        own transaction."""

        def changed(conn: Connection) -> _Changed:
            return _Changed(fn(conn))

        if self._updating.serving:
            call = changed if self.tally is None else self.tally.counting(changed)
            handed: outcome.Outcome[Any] | None = await self._updating.hand(call)
            if handed is not None:
                return int(self._answer(handed))  # (the batch read the count of rows)
        return await self.run(lambda conn: _Changed(fn(conn)).rows())

    def _batched(self) -> None:
        if self.tally is not None:
            self.tally.batched()

    def _answer(self, result: outcome.Outcome[T]) -> T:
        """A call's outcome as its caller sees it: a lost database is ``StorageUnavailable``."""
        fault = result.error if isinstance(result, outcome.Error) else None
        if isinstance(fault, FAULTS):
            self._health.failed(_first_line(fault))
            raise StorageUnavailable() from None
        if fault is None:
            self._health.worked()
        return result.unwrap()

    def _own(self, conn: psycopg.Connection[Any] | None) -> psycopg.Connection[Any]:
        """``conn`` if it still works, else a fresh connection in its place (the database
        restarted, or closed it): a batch never fails only because its connection is old."""
        if conn is not None:
            if _usable(conn):
                return conn
            conn.close()
        return psycopg.connect(self.url, **connection_options(self.timeout))

    def _writes_in_thread(self, batch: list[Job], lane: int) -> None:
        """Each write's outcome: all committed together in one transaction that takes the
        write lock once, or the ones that raised rolled back to their savepoints alone. A
        failure of the transaction itself (the connection, the lock, the ``COMMIT``) fails
        them all, and nothing of theirs is written."""
        self._together(batch, self._writers, lane, _BEGIN_WRITE)

    def _updates_in_thread(self, batch: list[Job], lane: int) -> None:
        """The one-statement writes (``update``) as ``_writes_in_thread`` commits writes,
        but without the write lock: a task's change waits for no creation. (A message row
        takes the lock in its own statement.)"""
        self._together(batch, self._updaters, lane, ("BEGIN",))

    def _together(
        self,
        batch: list[Job],
        lanes: list[psycopg.Connection[Any] | None],
        lane: int,
        begin: Sequence[str],
    ) -> None:
        try:
            conn = lanes[lane] = self._own(lanes[lane])
            if self._pipelined:
                results = self._in_one_pipeline(conn, batch, begin, lanes, lane)
            else:
                results = _each_answered(conn, batch, begin, pipelined=False)
        except Exception as exc:
            lost = lanes[lane]
            if lost is not None:
                lost.close()  # a fresh connection next time
                lanes[lane] = None
            for job in batch:
                job.result = outcome.Error(exc)
            return
        for job, result in zip(batch, results, strict=True):
            job.result = result

    def _in_one_pipeline(
        self,
        conn: psycopg.Connection[Any],
        batch: list[Job],
        begin: Sequence[str],
        lanes: list[psycopg.Connection[Any] | None],
        lane: int,
    ) -> list[outcome.Outcome[Any]]:
        """``batch`` in one pipeline, answered in one round trip (more only where a call
        reads a result on its way). A statement that fails aborts what is queued after it,
        and which call it was is not known then; nor are psycopg's prepared statements
        sure to exist on the server any more. So the lane's connection is dropped, and the
        batch runs again on a fresh connection that prepares nothing, each call answered
        alone (that connection is closed after)."""
        try:
            return _all_at_once(conn, batch, begin)
        except FAULTS:
            raise
        except psycopg.Error:
            conn.close()
            lanes[lane] = None
        options = connection_options(self.timeout)
        again = psycopg.connect(self.url, prepare_threshold=None, **options)
        try:
            return _each_answered(again, batch, begin, pipelined=True)
        finally:
            again.close()

    def _reads_in_thread(self, batch: list[Job], lane: int) -> None:
        """Each read's outcome on the reader's connection (in autocommit): the ``SELECT``s
        all sent at once and answered in one round trip, the other reads one after
        another. A lost connection fails the reads after it."""
        try:
            conn = self._readers[lane] = self._own(self._readers[lane])
        except FAULTS as exc:
            for job in batch:
                job.result = outcome.Error(exc)
            return
        selects = [job for job in batch if isinstance(job.fn, Select)]
        if self._pipelined and len(selects) > 1 and not _select_together(conn, selects):
            # one failed: each is read again alone, on a fresh connection (psycopg's
            # prepared statements may not exist on the server after a failed pipeline)
            conn.close()
            try:
                conn = self._readers[lane] = self._own(None)
            except FAULTS as exc:
                self._readers[lane] = None
                for job in batch:
                    job.result = outcome.Error(exc)
                return
        for job in batch:
            if job.result is not None:
                continue
            if conn.closed or conn.broken:
                job.result = outcome.Error(psycopg.OperationalError("the connection was lost"))
                continue
            job.result = outcome.capture(job.fn, _Statements(conn))
        if conn.closed or conn.broken:
            conn.close()
            self._readers[lane] = None

    async def _on_connection(self, use: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``use(connection)`` in a worker thread, on a connection of the pool's."""
        if not self._opened:
            await self.open()
        async with self._limiter:
            result = await trio.to_thread.run_sync(self._in_thread, use)
        fault = result.error if isinstance(result, outcome.Error) else None
        if isinstance(fault, FAULTS):
            self._health.failed(_first_line(fault))
            raise StorageUnavailable() from None
        if fault is None:
            self._health.worked()
        return result.unwrap()

    async def write(self, fn: Callable[[Connection], T]) -> T:
        """``fn`` all or nothing under the write lock: while the writer runs, in its batch
        (each write in a savepoint of the batch's transaction, acknowledged once that
        commits); otherwise on a pooled connection, one transaction of its own."""
        if self._writing.serving:
            call = fn if self.tally is None else self.tally.counting(fn)
            if self.tally is not None:
                self.tally.wrote()
            handed = await self._writing.hand(call)
            if handed is not None:
                return self._answer(handed)
        statements = _in_pipeline if self._pipelined else _one_by_one
        transaction = in_transaction(_BEGIN_WRITE, fn)
        if self.tally is not None:
            transaction = self.tally.counting(transaction)
            self.tally.wrote()
        return await self._on_connection(partial(statements, fn=transaction))

    async def changes(
        self, after: int, attentive: bool, poll: float, wake: trio.Event, own: str = ""
    ) -> list[Message] | None:
        if self.tally is not None:
            self.tally.looked()
        try:
            return await trio.to_thread.run_sync(self._wait, after, own, abandon_on_cancel=True)
        except FAULTS as exc:
            self._health.failed(_first_line(exc))
            await trio.sleep(min(IDLE_POLL, self.timeout))
        # the rows are the truth: read them anyway, the pool may still reach the database
        return await self.run(partial(messages_after, after=after)) or None

    def _wait(self, after: int, own: str) -> list[Message] | None:
        """Block until a notification arrives or a second passes, then read the message
        rows after ``after`` on the listening connection itself (one thread hop for both).
        Notifications that all came from ``own``, this worker, need no reading, unless the
        last read is a second old. In a worker thread, abandoned when the run ends: it
        closes its connection itself then."""
        with self._listening:
            if self._closed:
                return None
            self._waiting = True
        listener = self._listener
        try:
            if listener is None or listener.closed:
                listener = self._listener = psycopg.connect(
                    self.url, **connection_options(self.timeout)
                )
                listener.execute(f"LISTEN {CHANNEL}")
            # one, or all those that came in the same packet as the first (one that comes
            # while the rows are read waits in psycopg's backlog for the next call)
            heard = [n.payload for n in listener.notifies(timeout=IDLE_POLL, stop_after=1)]
            mine = bool(heard) and all(origin == own for origin in heard)
            if self._closed or (mine and time.monotonic() < self._read + IDLE_POLL):
                return None
            self._read = time.monotonic()
            return messages_after(_Statements(listener), after) or None
        except BaseException:
            if listener is not None:
                listener.close()
            raise
        finally:
            with self._listening:
                self._waiting = False
                if self._closed and listener is not None:
                    listener.close()

    def _in_thread(self, use: Callable[[psycopg.Connection[Any]], T]) -> outcome.Outcome[T]:
        try:
            conn = self._lend()
            try:
                return outcome.capture(use, conn)
            finally:
                self.pool.putconn(conn)  # a transaction left open is rolled back there
        except FAULTS as exc:
            return outcome.Error(exc)

    def _lend(self) -> psycopg.Connection[Any]:
        """A connection of the pool's that the database has not closed. Each one it has
        closed (a restart, ``idle_session_timeout``) is closed here too and handed back,
        and the pool opens another in its place. psycopg-pool's own check would ask the
        database with a round trip for every statement, and wait between tries: seconds
        for the first statement after a restart, once for each connection held."""
        deadline = time.monotonic() + self.timeout
        while True:
            conn = self.pool.getconn(max(0.0, deadline - time.monotonic()))
            if _usable(conn):
                return conn
            conn.close()
            self.pool.putconn(conn)


def _usable(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection still works. Nothing is sent to an idle connection that
    does not listen for notifications unless the database is closing it (it says why, then
    closes): one with nothing to read works. One that has something is asked with an empty
    query, the round trip psycopg-pool's own check makes every time."""
    if conn.closed or conn.broken:
        return False
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if not poller.poll(0):
        return True
    try:
        ConnectionPool.check_connection(conn)
    except psycopg.Error:
        return False
    return True


@asynccontextmanager
async def open_postgres(
    url: str, *, lease: float = DEFAULT_LEASE, statement_timeout: float = 5.0
) -> AsyncIterator[SharedBackend]:
    """The shared backend on the PostgreSQL database ``url``, migrated if need be."""
    await trio.to_thread.run_sync(check_database, url, statement_timeout)
    db = PostgresDatabase(url, statement_timeout)
    await db.open()
    async with SharedBackend.open(db, lease=lease) as backend:
        yield backend
