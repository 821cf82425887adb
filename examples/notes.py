"""A notes server, ported from an SDK server: pydantic models in and out, one SQLite connection
opened by the lifespan and shared by every handler, a resource template with a typed variable
and a prompt with a typed argument.

Serve it with ``presa-trio serve examples.notes:server --http 127.0.0.1:8000``; the notes live
in ``$NOTES_DB`` (``notes.db`` when unset).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, Field

from presa_trio import Context, InvalidParams, Server


class NewNote(BaseModel):
    title: Annotated[str, Field(min_length=1, max_length=200)]
    body: str = ""
    tags: set[str] = set()


class Note(NewNote):
    id: int
    created: datetime


@dataclass
class Notes:
    """What the lifespan holds: one connection, used by one thread at a time."""

    db: sqlite3.Connection
    lock: threading.Lock

    def add(self, note: NewNote) -> Note:
        created = datetime.now(UTC)
        with self.lock, self.db:
            cursor = self.db.execute(
                "INSERT INTO notes (title, body, tags, created) VALUES (?, ?, ?, ?)",
                (note.title, note.body, ",".join(sorted(note.tags)), created.isoformat()),
            )
        assert cursor.lastrowid is not None
        return Note(id=cursor.lastrowid, created=created, **note.model_dump())

    def find(self, tag: str | None, limit: int) -> list[Note]:
        query = "SELECT id, title, body, tags, created FROM notes ORDER BY id LIMIT ?"
        with self.lock:
            rows = self.db.execute(query, (limit if tag is None else -1,)).fetchall()
        notes = [self._note(row) for row in rows]
        if tag is not None:
            notes = [note for note in notes if tag in note.tags][:limit]
        return notes

    def get(self, note_id: int) -> Note | None:
        query = "SELECT id, title, body, tags, created FROM notes WHERE id = ?"
        with self.lock:
            row = self.db.execute(query, (note_id,)).fetchone()
        return None if row is None else self._note(row)

    @staticmethod
    def _note(row: tuple[int, str, str, str, str]) -> Note:
        note_id, title, body, tags, created = row
        return Note(
            id=note_id,
            title=title,
            body=body,
            tags=set(filter(None, tags.split(","))),
            created=datetime.fromisoformat(created),
        )


@asynccontextmanager
async def lifespan(server: Server) -> AsyncIterator[Notes]:
    db = sqlite3.connect(os.environ.get("NOTES_DB", "notes.db"), check_same_thread=False)
    try:
        db.execute(
            "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL,"
            " body TEXT NOT NULL, tags TEXT NOT NULL, created TEXT NOT NULL)"
        )
        yield Notes(db, threading.Lock())
    finally:
        db.close()


server = Server("notes", version="1.0.0", lifespan=lifespan)


@server.tool()
def add_note(ctx: Context, note: NewNote) -> Note:
    """Stores a note and returns it with its id."""
    notes: Notes = ctx.lifespan
    return notes.add(note)


@server.tool()
def list_notes(
    ctx: Context, tag: str | None = None, limit: Annotated[int, Field(ge=1, le=100)] = 20
) -> list[Note]:
    """Lists notes, oldest first, optionally only those with a tag."""
    notes: Notes = ctx.lifespan
    return notes.find(tag, limit)


@server.resource("notes://{note_id}", mime_type="application/json")
def note(ctx: Context, note_id: int) -> str:
    """One note as JSON."""
    notes: Notes = ctx.lifespan
    found = notes.get(note_id)
    if found is None:
        raise InvalidParams("Resource not found", {"uri": f"notes://{note_id}"})
    return found.model_dump_json()


@server.prompt()
def summarize(ctx: Context, note_id: int, words: int = 50) -> str:
    """Asks the model to summarize one note."""
    notes: Notes = ctx.lifespan
    found = notes.get(note_id)
    if found is None:
        raise InvalidParams(f"No note {note_id}")
    return f"Summarize this note in at most {words} words:\n\n{found.title}\n\n{found.body}"


app = server.asgi_app()
