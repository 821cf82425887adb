"""The two sweeps of a run's tasks: records past their TTL, and the tasks of lost workers.

The expiry sweep deletes a record a grace after its TTL (past its TTL a task is unknown to
every request already). The lost-worker sweep runs when the store keeps leases
(``LeaseStore``) and the backend keeps worker leases (``WorkerLeases``), whatever either
is: it fails the unfinished tasks of workers whose lease lapsed. Each round runs behind an
error boundary, and a store that is down was reported where it failed: the next round
retries. What it does not do: judge whether a worker is alive (the backend's leases do), or
run tasks (``_runner``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import NoReturn

import trio

from ...backends import WorkerLeases
from ...errors import InternalError, ServiceUnavailable
from ...extensions import error_boundary
from ._runner import TaskRunner
from ._states import Failed
from ._store import LeaseStore, TaskStore

logger = logging.getLogger("presa_trio.tasks")

#: How long after its TTL an expired record stays stored (invisible) before the reaper
#: deletes it: longer than the runner takes to record a running task's expiry.
REAP_GRACE_MS = 10_000


async def reap_expired(store: TaskStore, now_ms: Callable[[], int], interval: float) -> NoReturn:
    """Every ``interval`` seconds, delete the records a grace past their TTL: the runner of
    a task still running records (and announces) its expiry before it is gone."""
    while True:
        await trio.sleep(interval)
        with error_boundary("the task reaper", logger), _store_down_is_logged():
            await store.delete_expired(now_ms() - REAP_GRACE_MS)


async def reap_orphans(store: LeaseStore, runner: TaskRunner, leases: WorkerLeases) -> NoReturn:
    """Fail the unfinished tasks of lost workers (a worker that left, or has not renewed
    its lease), checked every quarter lease by every worker that may judge leases
    (``WorkerLeases.judges_leases``): a task of a lost worker is failed within a lease and a
    quarter, and an outage of the backend fails nothing. Compare-and-set makes the first
    worker to notice the one that commits; a lost worker that comes back finds its tasks
    terminal, and its late outcomes change nothing."""
    lost = InternalError("The worker running this task was lost").to_error()
    while True:
        await trio.sleep(leases.lease / 4)
        if not leases.judges_leases:
            continue
        with error_boundary("the lost-worker reaper", logger), _store_down_is_logged():
            for task_id in await lost_tasks(store, leases):
                await runner.commit(task_id, Failed(lost))


async def lost_tasks(store: LeaseStore, leases: WorkerLeases) -> list[str]:
    """The unfinished tasks of workers whose lease lapsed. The owners are read before the
    leases: a worker that joins in between owns nothing in what was read, so a worker too
    new to have been seen alive is never taken for lost."""
    owners = await store.owners()
    if not owners:
        return []
    lost = owners - await leases.live_workers()
    return await store.orphans(lost) if lost else []


def _store_down_is_logged() -> contextlib.AbstractContextManager[None]:
    """A store that is down was reported (once) where it failed: the next round retries."""
    return contextlib.suppress(ServiceUnavailable)
