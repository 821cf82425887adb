"""Opening a database: workers starting together open a new SQLite file, instances starting
together migrate once, and a newer schema is refused."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from support.postgres_cluster import Cluster

from presa_trio._backends.postgres import check_database
from presa_trio._backends.sqlite import check_file
from presa_trio.backends import BackendError


def test_workers_starting_together_open_a_new_sqlite_file(tmp_path: Path) -> None:
    """Connections switching one new file to WAL at the same moment all get it: SQLite
    refuses all but one with "database is locked" at once, without its busy timeout, and a
    worker's startup failed (so did hypercorn's other workers). Six at once, a hundred
    times: before the retry about one round in twelve failed."""
    errors: list[str] = []
    for round_ in range(100):
        path = str(tmp_path / f"round{round_}.db")
        barrier = threading.Barrier(6)

        def start(path: str = path, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                check_file(path)
            except BackendError as exc:  # collected for the assertion below
                errors.append(str(exc))

        in_threads_at_once(6, start)
    assert errors == []


def in_threads_at_once(count: int, start: Callable[[], None]) -> None:
    """``start`` in ``count`` threads started together, until every one has returned."""
    threads = [threading.Thread(target=start) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_instances_starting_together_migrate_once(postgres: Cluster) -> None:
    url = postgres.new_database()
    errors: list[BaseException] = []

    def start() -> None:
        try:
            check_database(url, 5.0)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    in_threads_at_once(6, start)
    assert errors == []
    with psycopg.connect(url) as db:
        version = db.execute("SELECT value FROM presa_meta WHERE key = 'schema_version'")
        assert version.fetchall() == [("1",)]


def test_a_newer_schema_is_refused(postgres: Cluster) -> None:
    url = postgres.new_database()
    check_database(url, 5.0)
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("UPDATE presa_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(BackendError, match=r"written by a newer presa_trio \(schema 99\)"):
        check_database(url, 5.0)
