"""Many workers behave as one server: ``hypercorn --worker-class trio --workers 3`` on
127.0.0.1 sharing one SQLite file (``PRESA_STORE``), every request on a new connection, as
behind a load balancer. The kernel spreads connections over the workers, so a request lands
on another worker than the one before it two times in three.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from support.live_http import mcp_request, open_exchange
from support.servers import running
from support.workers_client import HERE, LEASE, LOST, TASKS, YES, Cluster, park_and_run, warm

pytestmark = pytest.mark.e2e


def sqlite_setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder for the tools' records, and the environment naming one SQLite file."""
    records = tmp_path / "records"
    records.mkdir()
    env = {
        "PRESA_STORE": f"sqlite:///{tmp_path}/shared.db?lease={LEASE}",
        "WORKERS_DIR": str(records),
    }
    return records, env


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    records, env = sqlite_setup(tmp_path)
    with running("workers_app:app", HERE, args=("--workers", "3"), env=env) as served:
        cluster = Cluster(served, records)
        trio.run(warm, cluster)
        yield cluster


async def test_tasks_are_created_read_answered_and_cancelled_on_any_worker(
    cluster: Cluster,
) -> None:
    parked = [await cluster.create("asker", f"ask{n}") for n in range(6)]
    running_ = [await cluster.create("sleeper", f"sleep{n}") for n in range(6)]
    owners = {cluster.pid_of(f"ask{n}") for n in range(6)} | {
        cluster.pid_of(f"sleep{n}") for n in range(6)
    }
    assert len(owners) >= 2, "the tasks all ran on one worker: nothing crossed"
    for task_id in parked + running_:
        for _ in range(6):  # every worker finds every task
            assert (await cluster.task("tasks/get", task_id))["taskId"] == task_id
    for n, task_id in enumerate(parked):
        await cluster.until(task_id, "input_required")
        ack = await cluster.task("tasks/update", task_id, inputResponses={"go": YES})
        assert ack["resultType"] == "complete"  # and the owner used the answer:
        done = await cluster.until(task_id, "completed", "failed")
        assert done["result"]["content"] == [
            {"type": "text", "text": f"go=True on {cluster.pid_of(f'ask{n}')}"}
        ]
    for n, task_id in enumerate(running_):
        await cluster.task("tasks/cancel", task_id)
        acked = time.time()
        cleaned = cluster.records / f"sleep{n}.cleaned"
        assert cleaned.exists(), "tasks/cancel was acknowledged before the owner's cleanup"
        assert float(cleaned.read_text()) <= acked
        assert (await cluster.task("tasks/get", task_id))["status"] == "cancelled"


async def test_mrtr_rounds_on_different_connections(cluster: Cluster) -> None:
    for _ in range(10):
        asked = await cluster.rpc("tools/call", {"name": "question", "arguments": {}})
        assert asked["resultType"] == "input_required"
        params = {
            "name": "question",
            "arguments": {},
            "inputResponses": {"go": YES},
            "requestState": asked["requestState"],
        }
        done = await cluster.rpc("tools/call", params)
        assert done["content"] == [{"type": "text", "text": "go=True"}]


async def test_a_listener_hears_changes_made_on_ten_other_connections(cluster: Cluster) -> None:
    body, headers = mcp_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, capabilities=TASKS
    )
    async with open_exchange(cluster.port, body, headers) as stream:
        ack = await stream.next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        for _ in range(10):
            await cluster.rpc("tools/call", {"name": "announce", "arguments": {}})
            with trio.fail_after(5):
                change = await stream.next_message()
            assert change["method"] == "notifications/tools/list_changed"


async def test_a_listener_on_a_task_hears_its_notifications(cluster: Cluster) -> None:
    task_id = await cluster.create("asker", "listened")
    await cluster.until(task_id, "input_required")
    body, headers = mcp_request(
        "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, capabilities=TASKS
    )
    async with open_exchange(cluster.port, body, headers) as stream:
        ack = await stream.next_message()
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        await cluster.task("tasks/update", task_id, inputResponses={"go": YES})
        seen = []
        with trio.fail_after(10):
            while not seen or seen[-1]["status"] != "completed":
                note = await stream.next_message()
                assert note["method"] == "notifications/tasks"
                seen.append({k: v for k, v in note["params"].items() if k != "_meta"})
        final = await cluster.task("tasks/get", task_id)
        assert seen[-1] == {k: v for k, v in final.items() if k not in ("resultType", "_meta")}


async def test_a_killed_instance_s_tasks_fail_within_the_lease_and_the_other_serves_on(
    tmp_path: Path,
) -> None:
    """Two hypercorn instances (one worker each) on one file: SIGKILL the one that runs and
    parks tasks; the other fails them within lease + lease/4 and keeps serving."""
    records, env = sqlite_setup(tmp_path)
    with (
        running("workers_app:app", HERE, env=env) as one,
        running("workers_app:app", HERE, env=env) as two,
    ):
        a, b = Cluster(one, records), Cluster(two, records)
        await warm(a, 1)
        await warm(b, 1)
        tags = await park_and_run(a, "a")
        ((victim, doomed),) = tags.items()
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        for task_id in doomed.values():
            failed = await b.until(task_id, "failed", within=LEASE * 1.25 + 5)
            assert failed["error"] == LOST
        assert time.monotonic() - killed <= LEASE * 1.25 + 2.5
        for _ in range(10):  # the other instance serves on
            assert await b.whoami() != victim


async def test_under_one_hypercorn_a_killed_worker_s_tasks_fail_at_the_next_start(
    tmp_path: Path,
) -> None:
    """hypercorn's supervisor stops every worker when one dies with a non-zero status
    (hypercorn 0.18 ``run``: it sets its shutdown event and terminates them at once, with
    a SIGTERM its workers do not handle). So every worker of that run is lost, and the next
    start finds their leases lapsed and fails all their unfinished tasks."""
    records, env = sqlite_setup(tmp_path)
    with running("workers_app:app", HERE, args=("--workers", "3"), env=env) as served:
        cluster = Cluster(served, records)
        await warm(cluster)
        tags = await park_and_run(cluster, "w")
        victim, doomed = next((pid, kinds) for pid, kinds in tags.items() if len(kinds) == 2)
        siblings = [t for pid, kinds in tags.items() if pid != victim for t in kinds.values()]
        os.kill(victim, signal.SIGKILL)
        served.process.wait(timeout=30)  # hypercorn stops the rest, and exits
    with running("workers_app:app", HERE, args=("--workers", "3"), env=env) as served:
        again = Cluster(served, records)
        await warm(again)
        for task_id in doomed.values():
            failed = await again.until(task_id, "failed", within=LEASE * 1.25 + 5)
            assert failed["error"] == LOST
        for task_id in siblings:
            failed = await again.until(task_id, "failed", within=LEASE * 1.25 + 5)
            assert failed["error"] == LOST


async def test_a_finished_task_survives_a_full_restart(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    env = {"PRESA_STORE": f"sqlite:///{tmp_path}/shared.db", "WORKERS_DIR": str(records)}
    with running("workers_app:app", HERE, args=("--workers", "2"), env=env) as served:
        first = Cluster(served, records)
        task_id = await first.create("asker", "before")
        await first.until(task_id, "input_required")
        await first.task("tasks/update", task_id, inputResponses={"go": YES})
        done = await first.until(task_id, "completed")
        assert served.stop() == 0
    assert done["result"]["content"][0]["text"].startswith("go=True")
    with running("workers_app:app", HERE, args=("--workers", "2"), env=env) as served:
        again = Cluster(served, records)
        await warm(again, workers=2)
        for _ in range(6):  # whichever worker answers
            assert await again.task("tasks/get", task_id) == done
