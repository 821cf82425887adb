"""Older-era sessions on the run's shared SQL database (SQLite for one host, PostgreSQL for
many): one row each, the record as JSON beside the columns the store queries."""

from __future__ import annotations

from typing import final

from .._backends.protocol import Backend
from .._backends.sql import Connection, SqlBacked, SqlDatabase, Tables
from ..errors import CapacityExceeded
from .sessions import Change, SessionLimits, SessionRecord, SessionStore, decode, encode, now_ms


def session_store_on(backend: Backend) -> SessionStore | None:
    """The session store on ``backend``'s database, if it has one."""
    return SqlSessionStore(backend.db) if isinstance(backend, SqlBacked) else None


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS presa_sessions (session_id TEXT PRIMARY KEY, "
    "principal TEXT NOT NULL, expires_ms BIGINT NOT NULL, record TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS presa_sessions_principal ON presa_sessions (principal)",
    "CREATE INDEX IF NOT EXISTS presa_sessions_expires ON presa_sessions (expires_ms)",
)


@final
class SqlSessionStore:
    """Sessions on the run's shared database: one row each, the record as JSON."""

    def __init__(self, db: SqlDatabase) -> None:
        self.db = db
        self._tables = Tables(_SCHEMA)

    async def _prepare(self) -> None:
        await self._tables.ensure(self.db)

    async def create(self, record: SessionRecord, limits: SessionLimits) -> None:
        await self._prepare()

        def insert(conn: Connection) -> None:
            total, mine = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(CASE WHEN principal = ? THEN 1 ELSE 0 END), 0) "
                "FROM presa_sessions WHERE expires_ms > ?",
                (record.principal, now_ms()),
            ).fetchone()
            refused = limits.refusal(int(total), int(mine), record.principal)
            if refused is not None:
                raise CapacityExceeded(refused, "Too many open sessions")
            conn.execute(
                "INSERT INTO presa_sessions VALUES (?, ?, ?, ?)",
                (record.session_id, record.principal, record.expires_ms, encode(record)),
            )

        await self.db.write(insert)

    async def get(self, session_id: str) -> SessionRecord | None:
        await self._prepare()

        def select(conn: Connection) -> str | None:
            row = conn.execute(
                "SELECT record FROM presa_sessions WHERE session_id = ? AND expires_ms > ?",
                (session_id, now_ms()),
            ).fetchone()
            return None if row is None else str(row[0])

        text = await self.db.run(select)
        return None if text is None else decode(text)

    async def change(self, session_id: str, change: Change) -> SessionRecord | None:
        await self._prepare()

        def update(conn: Connection) -> SessionRecord | None:
            row = conn.execute(
                "SELECT record FROM presa_sessions WHERE session_id = ? AND expires_ms > ?",
                (session_id, now_ms()),
            ).fetchone()
            if row is None:
                return None
            record = change(decode(str(row[0])))
            conn.execute(
                "UPDATE presa_sessions SET expires_ms = ?, record = ? WHERE session_id = ?",
                (record.expires_ms, encode(record), session_id),
            )
            return record

        return await self.db.write(update)

    async def delete(self, session_id: str) -> bool:
        await self._prepare()

        def delete(conn: Connection) -> bool:
            cursor = conn.execute("DELETE FROM presa_sessions WHERE session_id = ?", (session_id,))
            return bool(cursor.rowcount == 1)

        return await self.db.run(delete)

    async def delete_expired(self, now: int) -> int:
        await self._prepare()

        def delete(conn: Connection) -> int:
            cursor = conn.execute("DELETE FROM presa_sessions WHERE expires_ms <= ?", (now,))
            return int(cursor.rowcount)

        return await self.db.run(delete)
