"""The directory watch the SQLite backend wakes on: Linux's inotify, none elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from presa_trio._backends.dir_watch import DirectoryWatch


async def test_a_write_in_the_directory_wakes_it_once(tmp_path: Path) -> None:
    watched, elsewhere = tmp_path / "watched", tmp_path / "elsewhere"
    watched.mkdir()
    elsewhere.mkdir()
    watch = DirectoryWatch.open(str(watched))
    if not sys.platform.startswith("linux"):
        assert watch is None  # no inotify: the caller polls
        return
    assert watch is not None
    try:
        with trio.move_on_after(0.2) as idle:
            await watch.written()
        assert idle.cancelled_caught, "woke with nothing written"
        (elsewhere / "other").write_bytes(b"x")
        with trio.move_on_after(0.2) as unrelated:
            await watch.written()
        assert unrelated.cancelled_caught, "woke for another directory's file"
        with (watched / "db-wal").open("ab") as log:
            for _ in range(3):
                log.write(b"frame")
                log.flush()
        with trio.fail_after(5):
            await watch.written()  # the three writes, reported at once
        with trio.move_on_after(0.2) as consumed:
            await watch.written()
        assert consumed.cancelled_caught, "the three writes woke it twice"
    finally:
        watch.close()
    watch.close()  # again: nothing


def test_a_directory_that_is_not_there_cannot_be_watched(tmp_path: Path) -> None:
    assert DirectoryWatch.open(str(tmp_path / "missing")) is None
