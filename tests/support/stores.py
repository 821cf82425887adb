"""Stores for backend tests: a SQLite URL in a test's folder, a new store of either kind (a file,
or a database of the run's PostgreSQL cluster), and a task record owned by a worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from presa_trio.ext.tasks._states import Status, TaskRecord


def url_of(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/state.db?poll=0.005&lease=0.2"


def shared_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A new store of ``kind``: a file in ``tmp_path``, or a database of the run's cluster."""
    if kind == "postgresql":
        return str(request.getfixturevalue("postgres").new_database())
    return url_of(tmp_path)


def task(task_id: str, owner: str) -> TaskRecord:
    return TaskRecord(task_id, "p", "tool", Status.WORKING, 1, 1, None, None, owner=owner)
