"""The task store on a shared SQL database (SQLite for one host, PostgreSQL for many).

One row per task: the record as JSON, beside the columns the store queries (principal, owner,
revision, whether it is terminal, when it expires), and one row that holds how many tasks are
stored. Creation counts and inserts in one serialised write, so ``TaskLimits`` hold across all
workers; compare-and-set is one ``UPDATE ... WHERE revision = ?``, a statement of its own
outside PostgreSQL's serialised writes (SQLite serialises every write; its writer commits it
with the others) (it inserts nothing, and a task it ends can only have been
counted as still running by a creation that read before: a stricter count, never a looser
one), and the revision is also the fencing token: once another worker has failed a task of
a worker it believed lost, that worker's next write carries a stale revision and changes
nothing. It keeps the ``TaskStore`` and ``LeaseStore`` contracts (checked by
``testing.check_task_store`` and ``check_lease_store``): which workers own unfinished tasks,
and which tasks lost workers leave. Which workers are lost is the backend's to say.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, final

import trio

from ...backends import Connection, SqlDatabase, Tables
from ...errors import CapacityExceeded
from ...extensions import to_json
from ._states import Status, TaskRecord
from ._store import TaskLimits

T = TypeVar("T")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS presa_tasks (task_id TEXT PRIMARY KEY, principal TEXT NOT NULL, "
    "owner TEXT NOT NULL, revision BIGINT NOT NULL, terminal INTEGER NOT NULL, "
    "expires_ms BIGINT, record TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS presa_tasks_principal ON presa_tasks (principal, terminal)",
    "CREATE INDEX IF NOT EXISTS presa_tasks_active ON presa_tasks (terminal, owner)",
    "CREATE INDEX IF NOT EXISTS presa_tasks_expires ON presa_tasks (expires_ms)",
    # A principal's tasks in id order: a page of the 2025-11-25 tasks/list is one seek.
    "CREATE INDEX IF NOT EXISTS presa_tasks_listing ON presa_tasks (principal, task_id)",
    # How many tasks are stored, kept by the writes that add and remove them: a creation
    # that counted the table read every row (on PostgreSQL 13-16 ms at 90,000 stored), inside
    # the write that serialises every worker's creations. Made under the write lock, from
    # the rows already there (a database an older presa_trio wrote).
    "CREATE TABLE IF NOT EXISTS presa_task_total (total BIGINT NOT NULL)",
    "INSERT INTO presa_task_total (total) SELECT (SELECT COUNT(*) FROM presa_tasks) "
    "WHERE NOT EXISTS (SELECT 1 FROM presa_task_total)",
)

#: The total counted afresh from the rows (each sweep; also what a tool that writes rows
#: straight into the table runs after).
RECOUNT = "UPDATE presa_task_total SET total = (SELECT COUNT(*) FROM presa_tasks)"

# The owners of unfinished tasks, read every quarter lease by every worker: one index seek
# each (the next owner after the last), however many tasks each owns. Only the tasks of the
# owners found lost are read after (``_ORPHANS``).
_OWNERS = (
    "WITH RECURSIVE owners (owner) AS ("
    " SELECT (SELECT MIN(owner) FROM presa_tasks WHERE terminal = 0)"
    " UNION ALL SELECT (SELECT MIN(t.owner) FROM presa_tasks t"
    "  WHERE t.terminal = 0 AND t.owner > owners.owner)"
    " FROM owners WHERE owners.owner IS NOT NULL) "
    "SELECT owner FROM owners WHERE owner IS NOT NULL"
)
_ORPHANS = "SELECT task_id FROM presa_tasks WHERE terminal = 0 AND owner IN ({owners})"
_OWNERS_PER_STATEMENT = 500  # well within every SQLite's limit on parameters

# What ``create`` reads inside its write, in one statement (one round trip): whether the
# id is taken, and the counts for the limits. The principal's tasks are read from the
# (principal, terminal) index alone, and the total from its own row.
_TAKEN_AND_COUNTS = (
    "SELECT (SELECT total FROM presa_task_total), COUNT(*), "
    "COALESCE(SUM(CASE WHEN terminal = 0 THEN 1 ELSE 0 END), 0), "
    "(SELECT COUNT(*) FROM presa_tasks WHERE task_id = ?) "
    "FROM presa_tasks WHERE principal = ?"
)


def encode(task: TaskRecord) -> str:
    """A record as JSON text (every field, sets as sorted lists), written as the wire is: a
    result the runner found to be JSON is one this store can keep."""
    return to_json(
        {
            "task_id": task.task_id,
            "principal": task.principal,
            "tool": task.tool,
            "status": task.status.value,
            "created_ms": task.created_ms,
            "updated_ms": task.updated_ms,
            "ttl_ms": task.ttl_ms,
            "poll_interval_ms": task.poll_interval_ms,
            "status_message": task.status_message,
            "input_requests": task.input_requests,
            "used_keys": sorted(task.used_keys),
            "result": task.result,
            "error": task.error,
            "revision": task.revision,
            "owner": task.owner,
        }
    ).decode()


def decode(text: str) -> TaskRecord:
    fields: dict[str, Any] = json.loads(text)
    fields["status"] = Status(fields["status"])
    fields["used_keys"] = frozenset(fields["used_keys"])
    return TaskRecord(**fields)


def _expires(task: TaskRecord) -> int | None:
    return None if task.ttl_ms is None else task.created_ms + task.ttl_ms


@final
class SqlTaskStore:
    """``TaskStore`` on a ``SqlDatabase`` (the run's ``SharedBackend.db``)."""

    def __init__(self, db: SqlDatabase) -> None:
        self.db = db
        self._tables = Tables(_SCHEMA)

    async def _write(self, fn: Callable[[Connection], T]) -> T:
        """``fn``'s statements as one transaction, serialised with every other write."""
        await self._prepare()
        return await self.db.write(fn)

    async def _select(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        """The rows of one ``SELECT`` (sent with other requests' reads where it can be)."""
        await self._prepare()
        return await self.db.select(sql, parameters)

    async def _read(self, fn: Callable[[Connection], T]) -> T:
        """``fn``'s reads (on SQLite with other requests' reads, never behind a write)."""
        await self._prepare()
        return await self.db.read(fn)

    async def _prepare(self) -> None:
        await self._tables.ensure(self.db)

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        def insert(conn: Connection) -> None:
            *counts, taken = conn.execute(
                _TAKEN_AND_COUNTS, (task.task_id, task.principal)
            ).fetchone()
            if taken:
                raise ValueError(f"task {task.task_id!r} exists")
            refused = limits.refusal(*(int(count) for count in counts))
            if refused is not None:
                raise CapacityExceeded(refused, "Task capacity exhausted")
            conn.execute(
                "INSERT INTO presa_tasks VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    task.task_id,
                    task.principal,
                    task.owner,
                    task.revision,
                    int(task.terminal),
                    _expires(task),
                    encode(task),
                ),
            )
            conn.execute("UPDATE presa_task_total SET total = total + 1")

        await self._write(insert)

    async def get(self, task_id: str) -> TaskRecord | None:
        rows = await self._select("SELECT record FROM presa_tasks WHERE task_id = ?", (task_id,))
        return decode(str(rows[0][0])) if rows else None

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        def update(conn: Connection) -> Any:
            return conn.execute(
                "UPDATE presa_tasks SET revision = ?, terminal = ?, owner = ?, record = ? "
                "WHERE task_id = ? AND revision = ?",
                (
                    task.revision,
                    int(task.terminal),
                    task.owner,
                    encode(task),
                    task.task_id,
                    expected_revision,
                ),
            )

        await self._prepare()
        return await self.db.update(update) == 1

    async def delete_expired(self, now_ms: int) -> int:
        def delete(conn: Connection) -> int:
            deleted = conn.execute(
                "DELETE FROM presa_tasks WHERE expires_ms IS NOT NULL AND expires_ms <= ?",
                (now_ms,),
            ).rowcount
            # Counted afresh (a sweep a minute, not a creation): a total that a writer
            # outside this store left wrong, an older presa_trio's during an upgrade, is
            # right again after the next sweep.
            conn.execute(RECOUNT)
            return int(deleted)

        return await self._write(delete)

    async def count(self) -> int:
        return int((await self._select("SELECT COUNT(*) FROM presa_tasks"))[0][0])

    async def list_tasks(
        self, principal: str, after: str | None, limit: int, now_ms: int
    ) -> list[TaskRecord]:
        rows = await self._select(
            "SELECT record FROM presa_tasks WHERE principal = ? AND task_id > ? "
            "AND (expires_ms IS NULL OR expires_ms > ?) ORDER BY task_id LIMIT ?",
            (principal, after if after is not None else "", now_ms, limit),
        )
        return [decode(str(row[0])) for row in rows]

    async def owners(self) -> frozenset[str]:
        return frozenset(str(row[0]) for row in await self._select(_OWNERS))

    async def orphans(self, lost: frozenset[str]) -> list[str]:
        if not lost:
            await trio.lowlevel.checkpoint_if_cancelled()
            return []
        owners = sorted(lost)

        def select(conn: Connection) -> list[str]:
            found: list[str] = []
            for start in range(0, len(owners), _OWNERS_PER_STATEMENT):
                some = owners[start : start + _OWNERS_PER_STATEMENT]
                query = _ORPHANS.format(owners=", ".join("?" * len(some)))
                found += (str(row[0]) for row in conn.execute(query, some).fetchall())
            return found

        return await self._read(select)
