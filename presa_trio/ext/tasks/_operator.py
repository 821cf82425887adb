"""What an operator reads and does on a shared task store, with no server running here: every
principal's tasks, listed, shown and counted, the workers whose lease lapsed, and a cancel.

The reads are single statements on the store's database (``presa_trio.backends.open_database``):
on SQLite WAL readers that take no write lock, on PostgreSQL plain ``SELECT``\\ s, so running
servers are never held up. A cancel is ``tasks/cancel``'s own path (``Forwarder.cancel``): this
process joins the workers for the time of one cancel, asks the task's owner to cancel its
scope, and records ``cancelled``. What it does not do: check principals or scopes (whoever
holds the store's credentials is trusted with every task), or print (``_command``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, final

import trio

from ...backends import BackendError, Connection, SqlBacked, SqlDatabase, open_backend
from ._forwarding import Forwarder
from ._runner import TaskRunner
from ._sql_store import SqlTaskStore, decode
from ._states import Status, TaskRecord

_TABLES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN "
    "('presa_tasks', 'presa_workers')",
    "postgresql": "SELECT c.relname FROM pg_class c WHERE c.relname IN "
    "('presa_tasks', 'presa_workers') AND pg_table_is_visible(c.oid)",
}


class NotAStore(LookupError):
    """The database holds no presa_trio shared store (its tables are not there)."""


@final
@dataclass(frozen=True, slots=True)
class Filters:
    """Which tasks ``list`` shows: all of them for the defaults."""

    statuses: frozenset[Status] = frozenset()
    principal: str | None = None
    tool: str | None = None
    older_than_ms: int | None = None  # created at least this long ago

    def keep(self, record: TaskRecord, now_ms: int) -> bool:
        return (
            (not self.statuses or record.status in self.statuses)
            and (self.tool is None or record.tool == self.tool)
            and (self.older_than_ms is None or now_ms - record.created_ms >= self.older_than_ms)
        )


@final
@dataclass(frozen=True, slots=True)
class Worker:
    """A worker that ``stats`` names: its id, how long ago it last renewed its lease (None:
    it left, or never joined), and how many unfinished tasks it owns."""

    worker_id: str
    silent_ms: int | None
    unfinished: int


@final
@dataclass(frozen=True, slots=True)
class Stats:
    by_status: dict[str, int]
    by_principal: dict[str, dict[str, int]]
    oldest_unfinished: TaskRecord | None
    live_workers: list[str]
    lost_workers: list[Worker]

    @property
    def total(self) -> int:
        return sum(self.by_status.values())


def now_ms() -> int:
    return int(time.time() * 1000)


async def _tables(db: SqlDatabase) -> set[str]:
    def select(conn: Connection) -> set[str]:
        return {str(row[0]) for row in conn.execute(_TABLES[db.kind]).fetchall()}

    found = await db.run(select)
    if "presa_workers" not in found:
        raise NotAStore("the database holds no presa_trio store")
    return found


async def records(db: SqlDatabase, principal: str | None = None) -> list[TaskRecord]:
    """Every stored task that has not expired (one principal's, when given), oldest first."""
    if "presa_tasks" not in await _tables(db):
        return []  # no task was ever created on this store
    query = "SELECT record FROM presa_tasks WHERE (expires_ms IS NULL OR expires_ms > ?)"
    params: tuple[Any, ...] = (now_ms(),)
    if principal is not None:
        query += " AND principal = ?"
        params += (principal,)

    def select(conn: Connection) -> list[str]:
        return [str(row[0]) for row in conn.execute(query, params).fetchall()]

    found = [decode(text) for text in await db.run(select)]
    return sorted(found, key=lambda record: (record.created_ms, record.task_id))


async def listing(db: SqlDatabase, filters: Filters, limit: int | None) -> list[TaskRecord]:
    """The tasks ``filters`` keep, oldest first, at most ``limit`` (the newest of them)."""
    now = now_ms()
    kept = [r for r in await records(db, filters.principal) if filters.keep(r, now)]
    return kept[-limit:] if limit is not None else kept


async def find(db: SqlDatabase, task_id: str) -> TaskRecord | None:
    """The stored task ``task_id``, expired or not (None: no such task)."""
    if "presa_tasks" not in await _tables(db):
        return None

    def select(conn: Connection) -> str | None:
        row = conn.execute(
            "SELECT record FROM presa_tasks WHERE task_id = ?", (task_id,)
        ).fetchone()
        return None if row is None else str(row[0])

    text = await db.run(select)
    return None if text is None else decode(text)


async def stats(db: SqlDatabase, lease: float) -> Stats:
    """Counts per status and per principal, the oldest unfinished task, and the workers:
    those whose lease holds, and the lost ones (lease lapsed, or gone while they still own
    unfinished tasks: what the lost-worker sweep of a running server fails next)."""
    stored = await records(db)

    def select(conn: Connection) -> list[tuple[str, int]]:
        query = f"SELECT worker_id, {db.clock} - heartbeat_ms FROM presa_workers"
        return [(str(row[0]), int(row[1])) for row in conn.execute(query).fetchall()]

    silent = dict(await db.run(select))
    by_status = {status.value: 0 for status in Status}
    by_principal: dict[str, dict[str, int]] = {}
    owned: dict[str, int] = {}
    for record in stored:
        by_status[record.status.value] += 1
        counts = by_principal.setdefault(record.principal, {})
        counts[record.status.value] = counts.get(record.status.value, 0) + 1
        if not record.terminal:
            owned[record.owner] = owned.get(record.owner, 0) + 1
    unfinished = [record for record in stored if not record.terminal]
    lease_ms = lease * 1000
    live = sorted(w for w, ms in silent.items() if ms <= lease_ms)
    lost_ids = {w for w, ms in silent.items() if ms > lease_ms} | (owned.keys() - set(live))
    lost = [Worker(w, silent.get(w), owned.get(w, 0)) for w in sorted(lost_ids)]
    return Stats(by_status, by_principal, unfinished[0] if unfinished else None, live, lost)


@final
@dataclass(frozen=True, slots=True)
class Cancelled:
    """What a cancel did: the record after it, and how long the owner took to acknowledge."""

    record: TaskRecord
    seconds: float


async def cancel(url: str, record: TaskRecord) -> Cancelled:
    """Cancel ``record``'s task as ``tasks/cancel`` does: its owner (another process) is
    asked to cancel the task's scope and waits, bounded, for its cleanup; then ``cancelled``
    is recorded, as it is when an owner that is lost never answers."""
    async with open_backend(url) as backend:
        if not isinstance(backend, SqlBacked):
            raise BackendError("tasks are shared only on a sqlite or postgresql store")
        store = SqlTaskStore(backend.db)
        runner = TaskRunner(store, now_ms, backend=backend)
        started = trio.current_time()
        await Forwarder(runner, backend).cancel(record.task_id, record.owner)
        seconds = trio.current_time() - started
        after = await store.get(record.task_id)
    return Cancelled(after if after is not None else record, seconds)


def statuses(names: Iterable[str]) -> frozenset[Status]:
    return frozenset(Status(name) for name in names)
