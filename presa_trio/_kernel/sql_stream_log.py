"""Resumable streams logged on the run's shared SQL database (SQLite for one host,
PostgreSQL for many): a row per stream, a row per logged message."""

from __future__ import annotations

from typing import final

from .._backends.protocol import Backend
from .._backends.sql import Connection, SqlBacked, SqlDatabase, Tables
from .stream_log import Appended, Page, StreamHead, StreamLimits, StreamLog, now_ms


def stream_log_on(backend: Backend) -> StreamLog | None:
    """The stream log on ``backend``'s database, if it has one."""
    return SqlStreamLog(backend.db) if isinstance(backend, SqlBacked) else None


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS presa_streams (stream_id TEXT PRIMARY KEY, "
    "session_id TEXT NOT NULL, principal TEXT NOT NULL, worker_id TEXT NOT NULL, "
    "next_seq INTEGER NOT NULL, size BIGINT NOT NULL, ended INTEGER NOT NULL, "
    "followed INTEGER NOT NULL, opened_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL, "
    "request_id TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS presa_streams_session ON presa_streams (session_id)",
    "CREATE INDEX IF NOT EXISTS presa_streams_expires ON presa_streams (expires_ms)",
    "CREATE TABLE IF NOT EXISTS presa_stream_events (stream_id TEXT NOT NULL, "
    "seq INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (stream_id, seq))",
)

_HEAD = (
    "SELECT session_id, principal, worker_id, next_seq, size, ended, followed, request_id "
    "FROM presa_streams WHERE stream_id = ? AND expires_ms > ?"
)


@final
class SqlStreamLog:
    """Resumable streams on the run's shared database."""

    def __init__(self, db: SqlDatabase) -> None:
        self.db = db
        self._tables = Tables(_SCHEMA)

    async def open(self, head: StreamHead, stream_id: str, limits: StreamLimits) -> bool:
        await self._tables.ensure(self.db)

        def insert(conn: Connection) -> bool:
            now = now_ms()
            count = _count(conn, head.session_id)
            if count >= limits.max_streams_per_session:
                old = conn.execute(
                    "SELECT stream_id FROM presa_streams WHERE session_id = ? AND ended = 1 "
                    "ORDER BY opened_ms LIMIT ?",
                    (head.session_id, count - limits.max_streams_per_session + 1),
                ).fetchall()
                for (gone,) in old:
                    _delete(conn, str(gone))
                if _count(conn, head.session_id) >= limits.max_streams_per_session:
                    return False
            conn.execute(
                "INSERT INTO presa_streams VALUES (?, ?, ?, ?, 1, 0, 0, 0, ?, ?, ?)",
                (
                    stream_id,
                    head.session_id,
                    head.principal,
                    head.worker_id,
                    now,
                    now + limits.idle_ms,
                    head.request,
                ),
            )
            return True

        return await self.db.write(insert)

    async def append(
        self, stream_id: str, data: bytes, limits: StreamLimits, *, final: bool = False
    ) -> Appended:
        await self._tables.ensure(self.db)

        def log(conn: Connection) -> Appended:
            return _log(conn, stream_id, data, limits, final)

        return await self.db.write(log)

    async def end_if_running(self, stream_id: str, data: bytes, limits: StreamLimits) -> bool:
        appended = await self.append(stream_id, data, limits, final=True)
        return appended.seq is not None

    async def read(self, stream_id: str, after: int, limit: int) -> Page | None:
        await self._tables.ensure(self.db)

        def select(conn: Connection) -> Page | None:
            row = conn.execute(_HEAD, (stream_id, now_ms())).fetchone()
            if row is None:
                return None
            session_id, principal, worker_id, next_seq, _, ended, _, request = row
            head = StreamHead(
                str(session_id),
                str(principal),
                str(worker_id),
                int(next_seq) - 1,
                bool(ended),
                str(request),
            )
            rows = conn.execute(
                "SELECT seq, data FROM presa_stream_events WHERE stream_id = ? AND seq > ? "
                "ORDER BY seq LIMIT ?",
                (stream_id, after, limit),
            ).fetchall()
            return Page(head, [(int(seq), str(text).encode()) for seq, text in rows])

        return await self.db.run(select)

    async def follow(self, stream_id: str) -> None:
        await self._tables.ensure(self.db)

        def mark(conn: Connection) -> None:
            conn.execute("UPDATE presa_streams SET followed = 1 WHERE stream_id = ?", (stream_id,))

        await self.db.write(mark)

    async def delete_session(self, session_id: str) -> int:
        await self._tables.ensure(self.db)

        def delete(conn: Connection) -> int:
            rows = conn.execute(
                "SELECT stream_id FROM presa_streams WHERE session_id = ?", (session_id,)
            ).fetchall()
            for (stream_id,) in rows:
                _delete(conn, str(stream_id))
            return len(rows)

        return await self.db.write(delete)

    async def delete_expired(self, now: int) -> int:
        await self._tables.ensure(self.db)

        def delete(conn: Connection) -> int:
            conn.execute(
                "DELETE FROM presa_stream_events WHERE stream_id IN "
                "(SELECT stream_id FROM presa_streams WHERE expires_ms <= ?)",
                (now,),
            )
            cursor = conn.execute("DELETE FROM presa_streams WHERE expires_ms <= ?", (now,))
            return int(cursor.rowcount)

        return await self.db.write(delete)


def _count(conn: Connection, session_id: str) -> int:
    row = conn.execute(
        "SELECT COUNT(*) FROM presa_streams WHERE session_id = ?", (session_id,)
    ).fetchone()
    return int(row[0])


def _delete(conn: Connection, stream_id: str) -> None:
    conn.execute("DELETE FROM presa_stream_events WHERE stream_id = ?", (stream_id,))
    conn.execute("DELETE FROM presa_streams WHERE stream_id = ?", (stream_id,))


def _log(
    conn: Connection, stream_id: str, data: bytes, limits: StreamLimits, final: bool
) -> Appended:
    """Log ``data`` on the stream if it is held, running, and its bounds allow (the answer
    always)."""
    now = now_ms()
    row = conn.execute(_HEAD, (stream_id, now)).fetchone()
    if row is None or row[5]:
        return Appended(None, False)
    next_seq, size, followed = int(row[3]), int(row[4]), bool(row[6])
    full = next_seq - 1 >= limits.max_events or size + len(data) > limits.max_bytes
    if full and not final:
        return Appended(None, followed)
    conn.execute(
        "INSERT INTO presa_stream_events VALUES (?, ?, ?)", (stream_id, next_seq, data.decode())
    )
    expires = now + (limits.retention_ms if final else limits.idle_ms)
    conn.execute(
        "UPDATE presa_streams SET next_seq = ?, size = ?, ended = ?, expires_ms = ? "
        "WHERE stream_id = ?",
        (next_seq + 1, size + len(data), 1 if final else 0, expires, stream_id),
    )
    return Appended(next_seq, followed)
