"""Counts of what a SQL database did, for benchmarks and tests: calls, writes, statements.

Off unless someone sets ``db.tally = Tally()`` on a ``SqliteDatabase`` or
``PostgresDatabase``; off, a call pays one ``is None`` test and nothing is wrapped. This
module does not time anything, and does not count what the database server does on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, final

from .sql import Connection

T = TypeVar("T")


@final
class Tally:
    """What one database handle did since the tally was set:

    - ``calls``: calls that reached the database, each a thread hop and at least one round
      trip (a PostgreSQL write sends its statements together, in one pipeline);
    - ``writes``: how many of those were write transactions;
    - ``statements``: the statements they ran, a write's ``BEGIN`` and ``COMMIT`` included;
    - ``looks``: the signal watcher's reads of the database (its background work, not a
      request's);
    - ``batches``: the thread hops of a writer that runs the calls in batches (SQLite).

    Statements run in worker threads, so the counts are kept under a lock.
    """

    __slots__ = ("_lock", "batches", "calls", "looks", "statements", "writes")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.writes = 0
        self.statements = 0
        self.looks = 0
        self.batches = 0

    def counting(self, fn: Callable[[Connection], T]) -> Callable[[Connection], T]:
        """``fn`` counted as one call, and each statement it runs."""
        with self._lock:
            self.calls += 1

        def counted(conn: Connection) -> T:
            return fn(_Counted(conn, self))

        return counted

    def selected(self) -> None:
        """One call of one statement (a ``Select`` sent with others), counted."""
        with self._lock:
            self.calls += 1
            self.statements += 1

    def wrote(self) -> None:
        """One of the calls is a write transaction."""
        with self._lock:
            self.writes += 1

    def batched(self) -> None:
        """The writer sent a batch of calls to its thread (one hop for all of them)."""
        with self._lock:
            self.batches += 1

    def looked(self) -> None:
        with self._lock:
            self.looks += 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {
                "calls": self.calls,
                "writes": self.writes,
                "statements": self.statements,
                "looks": self.looks,
                "batches": self.batches,
            }

    def _statement(self) -> None:
        with self._lock:
            self.statements += 1


@final
class _Counted:
    """A ``Connection`` that counts each statement before running it on the real one."""

    __slots__ = ("_conn", "_tally")

    def __init__(self, conn: Connection, tally: Tally) -> None:
        self._conn = conn
        self._tally = tally

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        self._tally._statement()
        return self._conn.execute(sql, parameters)
