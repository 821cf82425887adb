"""How a SQLite worker learns of other workers' writes: it reads nothing while nothing is written,
a commit is read once written, and a file written all the time is read at most twice per poll."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from presa_trio._backends import sqlite as _sqlite
from presa_trio._backends.sql import IDLE_POLL
from presa_trio._backends.sqlite import SqliteDatabase, check_file


def counting_looks(db: SqliteDatabase) -> list[int]:
    """Count ``db``'s reads of ``data_version`` (each one a thread hop): one entry per read."""
    looks: list[int] = []
    read = db._poll_once

    def counted(after: int) -> Any:
        looks.append(after)
        return read(after)

    db._poll_once = counted  # type: ignore[method-assign]
    return looks


def insert_message(conn: Any) -> None:
    conn.execute(
        "INSERT INTO presa_messages (origin, target, topic, body, created_ms) "
        "VALUES ('other', NULL, 'news', '{}', 0)"
    )


async def test_a_worker_expecting_signals_reads_nothing_while_nothing_is_written(
    tmp_path: Path,
) -> None:
    """Polling read ``data_version`` a hundred times a second, in a thread, for as long as
    a task ran or a listen stream was open; the directory watch reads it only after a
    write (Linux), and without inotify every ``poll`` as before."""
    path = str(tmp_path / "state.db")
    check_file(path)
    db = SqliteDatabase(path)
    looks = counting_looks(db)
    wake = trio.Event()
    with trio.move_on_after(0.5):
        while True:
            await db.changes(0, True, 0.01, wake)
    if sys.platform.startswith("linux"):
        assert looks == []
    else:
        assert len(looks) > 10
    await db.aclose()


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "polled"])
async def test_another_workers_commit_is_read_once_written(
    watched: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker waiting for signals reads a commit of another's: woken by the write to its
    log (the test above shows it does not poll then), or without a watch (another platform,
    or inotify's instances used up) by polling."""
    if not watched:
        monkeypatch.setattr(_sqlite.DirectoryWatch, "open", lambda directory: None)
    path = str(tmp_path / "state.db")
    check_file(path)
    waiting, other = SqliteDatabase(path), SqliteDatabase(path)
    rows: list[Any] = []

    async def wait_for_rows() -> None:
        while True:
            found = await waiting.changes(0, True, 0.01, trio.Event())
            if found:
                rows.extend(found)
                return

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_for_rows)
            await trio.testing.wait_all_tasks_blocked()
            await other.write(insert_message)
    assert [row[1:5] for row in rows] == [("other", None, "news", "{}")]
    await waiting.aclose()
    await other.aclose()


class Writes:
    """A watch that reports ``count`` writes, one per wait, then none (the real one reports
    the writes there were)."""

    def __init__(self, count: int) -> None:
        self.left = count

    async def written(self) -> None:
        if not self.left:
            await trio.sleep_forever()
        self.left -= 1
        await trio.lowlevel.checkpoint()

    def close(self) -> None:
        pass


async def first_look(db: SqliteDatabase, poll: float) -> None:
    """The first read of ``data_version`` (every later one compares with the last)."""
    awake = trio.Event()
    awake.set()
    assert await db.changes(0, False, poll, awake) == []


async def test_a_look_a_write_woke_that_found_nothing_is_not_held_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A look a write woke can find nothing: the commit was on its way, or the write was the
    first of two (a cancel writes the task's record, then its message). The next look
    follows the next write at once, or ``poll`` later if none comes, instead of no sooner
    than ``poll`` after the last and then up to a second. Once: the look after that is held
    back again, so a file written all the time is read at most twice per ``poll``. (Virtual
    time: the clock jumps to the next deadline whenever the test waits.)"""

    poll = 0.01
    path = str(tmp_path / "state.db")
    check_file(path)
    db, other = SqliteDatabase(path), SqliteDatabase(path)
    watch = Writes(1)
    db._writes_tried, db._writes = True, watch  # type: ignore[assignment]
    await first_look(db, poll)
    assert await db.changes(0, True, poll, trio.Event()) is None  # woken: nothing yet
    await other.write(insert_message)  # unseen by this watch
    started = trio.current_time()
    after = await db.changes(0, True, poll, trio.Event())
    assert after is not None and len(after) == 1
    assert trio.current_time() - started == pytest.approx(poll)  # not held back
    started = trio.current_time()
    assert await db.changes(0, True, poll, trio.Event()) is None
    assert trio.current_time() - started == pytest.approx(IDLE_POLL + poll)  # held back
    await db.aclose()
    await other.aclose()


async def test_after_a_look_a_write_woke_the_next_comes_within_poll(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Two commits reported together, the second not yet shown when the first is read (a
    commit is written before it shows): the look after one a write woke comes within
    ``poll`` even if nothing more is written, not a second later."""
    poll = 0.01
    path = str(tmp_path / "state.db")
    check_file(path)
    db, other = SqliteDatabase(path), SqliteDatabase(path)
    db._writes_tried, db._writes = True, Writes(1)  # type: ignore[assignment]
    await first_look(db, poll)
    await other.write(insert_message)
    assert len(await db.changes(0, True, poll, trio.Event()) or []) == 1  # woken
    await other.write(insert_message)  # its writing was reported with the first
    started = trio.current_time()
    assert len(await db.changes(1, True, poll, trio.Event()) or []) == 1
    assert trio.current_time() - started == pytest.approx(2 * poll)  # held back, then poll
    await db.aclose()
    await other.aclose()


async def test_a_file_written_all_the_time_is_read_at_most_twice_per_poll(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Writes that are not signals (task records, another directory's file) wake a worker
    that expects signals: of two looks in a row that a write woke and that found nothing,
    only the first lets the next one follow at once."""
    poll = 0.01
    path = str(tmp_path / "state.db")
    check_file(path)
    db = SqliteDatabase(path)
    db._writes_tried, db._writes = True, Writes(3)  # type: ignore[assignment]
    await first_look(db, poll)
    started = trio.current_time()
    for _ in range(3):
        assert await db.changes(0, True, poll, trio.Event()) is None
    # the first held back after the first look, the second not, the third again
    assert trio.current_time() - started == pytest.approx(2 * poll)
    await db.aclose()


async def test_attention_beginning_waits_for_the_next_write_not_a_look(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A worker that starts to expect signals (a request of an ``initialize`` session, say)
    does not read the file at once: what it expects is written from then on, and the watch
    reports that write. So a busy server does not pay a read per such request; a write still
    wakes the look at once."""
    poll = 0.01
    path = str(tmp_path / "state.db")
    check_file(path)
    db, other = SqliteDatabase(path), SqliteDatabase(path)
    await first_look(db, poll)
    db._writes_tried, db._writes = True, Writes(0)  # type: ignore[assignment]
    woken = trio.Event()
    woken.set()  # attention began
    started = trio.current_time()
    assert await db.changes(0, False, poll, woken) is None  # nothing written: one look, later
    assert trio.current_time() - started == pytest.approx(poll + 1.0)  # not at once
    db._writes = Writes(1)  # type: ignore[assignment]
    await other.write(insert_message)
    started = trio.current_time()
    assert len(await db.changes(0, False, poll, woken) or []) == 1
    assert trio.current_time() - started == pytest.approx(poll)  # the write, within poll
    await db.aclose()
    await other.aclose()
