"""Leases between workers: the orphans are the unfinished tasks of workers gone or silent (found
at the same cost however many tasks are unfinished), and a revision fences a worker declared
lost."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from support.stores import shared_url, task, url_of

from presa_trio.backends import SharedBackend, open_backend
from presa_trio.ext.tasks import _sql_store
from presa_trio.ext.tasks._reapers import lost_tasks
from presa_trio.ext.tasks._sql_store import SqlTaskStore
from presa_trio.ext.tasks._states import Completed, Failed, Status, TaskRecord, apply
from presa_trio.ext.tasks._store import TaskLimits


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_orphans_are_the_unfinished_tasks_of_workers_gone_or_silent(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every unfinished task of every lost worker, and nothing else (``lost_tasks``: the
    store's owners, less the backend's live workers): the owners are found one after
    another, so each of several must be reached (the first, one between, the last), and
    owners with only finished tasks, or none at all, never count.

    Judged by a worker whose lease is ten minutes, so no worker that renews counts as lost
    however slow the machine (with 200 ms, under load, the live worker's own tasks did);
    silence is a heartbeat written as the epoch, and a renewal is waited for, not timed."""
    url = shared_url(kind, tmp_path, request)
    # renewals every half second: a silence lasts long enough to be seen, however slow
    url = url + "&lease=2" if kind == "postgresql" else f"sqlite:///{tmp_path}/state.db?lease=2"
    judging = url.replace("lease=2", "lease=600")
    unlimited = TaskLimits(None, None, None)
    async with (
        open_backend(url) as alive,
        open_backend(url) as idle,
        open_backend(judging) as judge,
    ):
        assert isinstance(alive, SharedBackend) and isinstance(judge, SharedBackend)
        store = SqlTaskStore(alive.db)
        async with open_backend(url) as leaving, open_backend(url) as also_leaving:
            for n in range(3):
                await store.create(task(f"mine{n}", alive.worker_id), unlimited)
                await store.create(task(f"theirs{n}", leaving.worker_id), unlimited)
                await store.create(task(f"also{n}", also_leaving.worker_id), unlimited)
            finished = TaskRecord(
                "done", "p", "tool", Status.COMPLETED, 1, 1, None, None, owner="long-gone"
            )
            await store.create(finished, unlimited)
            assert await lost_tasks(store, judge) == []
        lost = [f"{who}{n}" for who in ("also", "theirs") for n in range(3)]
        assert sorted(await lost_tasks(store, judge)) == lost  # they left

        def silence(conn: Any) -> None:  # and a silent worker
            conn.execute(
                "UPDATE presa_workers SET heartbeat_ms = 0 WHERE worker_id = ?",
                (alive.worker_id,),
            )

        def heartbeat(conn: Any) -> int:
            row = conn.execute(
                "SELECT heartbeat_ms FROM presa_workers WHERE worker_id = ?", (alive.worker_id,)
            ).fetchone()
            return int(row[0])

        # alive's own renewal may come between silence and sweep: then silence it again
        silenced: list[str] = []
        with trio.fail_after(10):
            while not silenced:
                await alive.db.write(silence)
                orphans = sorted(await lost_tasks(store, judge))
                if await alive.db.run(heartbeat) == 0:
                    silenced = orphans
        assert silenced == sorted([*lost, "mine0", "mine1", "mine2"])
        with trio.fail_after(10):  # until it renews its lease (every lease/4)
            while await alive.db.run(heartbeat) == 0:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert sorted(await lost_tasks(store, judge)) == lost
        assert idle.worker_id not in {alive.worker_id, leaving.worker_id}


async def test_sqlite_orphans_cost_the_same_however_many_tasks_are_unfinished(
    tmp_path: Path,
) -> None:
    """The lost-worker sweep, every quarter lease on every worker, seeks each owner of an
    unfinished task in the index (``SqlTaskStore.owners``) and reads only the lost owners'
    tasks. Counted in SQLite's own steps, it costs as much with 10,001 unfinished tasks of a
    live worker as with one; reading every unfinished task to check its owner cost a step
    or more for each."""
    async with open_backend(url_of(tmp_path)) as backend:
        assert isinstance(backend, SharedBackend)
        store = SqlTaskStore(backend.db)
        await store.create(task("t", backend.worker_id), TaskLimits(None, None, None))
        with contextlib.closing(sqlite3.connect(tmp_path / "state.db")) as conn:

            def steps() -> int:
                counted = 0

                def count() -> int:
                    nonlocal counted
                    counted += 1
                    return 0  # go on

                conn.set_progress_handler(count, 1)
                try:
                    owners = conn.execute(_sql_store._OWNERS).fetchall()
                    assert owners == [(backend.worker_id,)]
                finally:
                    conn.set_progress_handler(None, 1)
                return counted

            one = steps()
            conn.execute(
                "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)"
                " INSERT INTO presa_tasks SELECT task_id || '-' || i, principal, owner, revision,"
                " terminal, expires_ms, record FROM presa_tasks, n"
            )
            conn.commit()
            many = steps()
    assert many < 2 * one, (one, many)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_the_revision_fences_a_worker_declared_lost(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Once another worker failed a task of a worker it believed lost, that worker's late
    outcome (written against the revision it last saw) changes nothing."""
    url = shared_url(kind, tmp_path, request)
    async with open_backend(url) as backend:
        assert isinstance(backend, SharedBackend)
        store = SqlTaskStore(backend.db)
        mine = task("t", "lost-worker")
        await store.create(mine, TaskLimits(None, None, None))
        failed = apply(mine, Failed({"code": -32603, "message": "lost"}), 2)
        assert await store.compare_and_set(failed, mine.revision)  # the reaper's commit
        late = apply(mine, Completed({"content": []}), 3)  # the lost worker's, too late
        assert not await store.compare_and_set(late, mine.revision)
        assert await store.get("t") == failed
