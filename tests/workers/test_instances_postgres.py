"""Many hosts are one server: two ``hypercorn --worker-class trio --workers 2`` instances on
different 127.0.0.1 ports sharing one PostgreSQL database (a throwaway cluster, Unix socket
only), every request on a new connection, as behind a load balancer.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
from support.live_http import mcp_request, open_exchange, request
from support.postgres_cluster import Cluster as Database
from support.postgres_cluster import running_cluster
from support.servers import running
from support.workers_client import HERE, LEASE, LOST, TASKS, YES, Cluster, park_and_run, warm

pytestmark = pytest.mark.e2e


@contextmanager
def two_instances(
    url: str, records: Path, lease: float = LEASE
) -> Iterator[tuple[Cluster, Cluster]]:
    env = {"PRESA_STORE": f"{url}&lease={lease}", "WORKERS_DIR": str(records)}
    args = ("--workers", "2")
    with (
        running("workers_app:app", HERE, args=args, env=env) as one,
        running("workers_app:app", HERE, args=args, env=env) as two,
    ):
        yield Cluster(one, records), Cluster(two, records)


def records_in(tmp_path: Path) -> Path:
    records = tmp_path / "records"
    records.mkdir()
    return records


async def test_two_instances_are_one_server(postgres: Database, tmp_path: Path) -> None:
    records = records_in(tmp_path)
    with two_instances(postgres.new_database(), records) as (a, b):
        await warm(a, 2)
        await warm(b, 2)
        # tasks: made on A, answered, read and cancelled on B
        parked = await a.create("asker", "parked")
        await b.until(parked, "input_required")
        await b.task("tasks/update", parked, inputResponses={"go": YES})
        done = await b.until(parked, "completed", "failed")
        owner = a.pid_of("parked")
        assert done["result"]["content"] == [{"type": "text", "text": f"go=True on {owner}"}]
        assert await a.task("tasks/get", parked) == done
        sleeping = await a.create("sleeper", "sleeping")
        await b.until(sleeping, "working")
        await b.task("tasks/cancel", sleeping)
        acked = time.time()
        cleaned = records / "sleeping.cleaned"
        assert cleaned.exists(), "tasks/cancel on B was acknowledged before A's cleanup"
        assert float(cleaned.read_text()) <= acked
        assert (await a.task("tasks/get", sleeping))["status"] == "cancelled"
        # MRTR: round 1 on A, round 2 on B
        asked = await a.rpc("tools/call", {"name": "question", "arguments": {}})
        retry = {"inputResponses": {"go": YES}, "requestState": asked["requestState"]}
        answered = await b.rpc("tools/call", {"name": "question", "arguments": {}, **retry})
        assert answered["content"] == [{"type": "text", "text": "go=True"}]
        # listen: a listener on A hears changes announced on B, each one
        body, headers = mcp_request(
            "subscriptions/listen",
            {"notifications": {"toolsListChanged": True}},
            capabilities=TASKS,
        )
        async with open_exchange(a.port, body, headers) as stream:
            assert (await stream.next_message())["method"] == (
                "notifications/subscriptions/acknowledged"
            )
            for _ in range(5):
                await b.rpc("tools/call", {"name": "announce", "arguments": {}})
                with trio.fail_after(5):
                    change = await stream.next_message()
                assert change["method"] == "notifications/tools/list_changed"


async def test_a_killed_instance_s_tasks_fail_within_the_lease_and_the_other_serves(
    postgres: Database, tmp_path: Path
) -> None:
    records = records_in(tmp_path)
    with two_instances(postgres.new_database(), records) as (a, b):
        await warm(a, 2)
        await warm(b, 2)
        tags = await park_and_run(a, "a")
        victim, doomed = next((pid, kinds) for pid, kinds in tags.items() if len(kinds) == 2)
        os.kill(victim, signal.SIGKILL)  # hypercorn then stops A's other worker too
        killed = time.monotonic()
        for task_id in doomed.values():
            failed = await b.until(task_id, "failed", within=LEASE * 1.25 + 5)
            assert failed["error"] == LOST
        assert time.monotonic() - killed <= LEASE * 1.25 + 3
        for _ in range(6):
            assert await b.whoami() != victim


async def test_losing_the_database_while_serving(tmp_path: Path) -> None:
    """A cluster of its own, stopped while the servers run: task requests answer a generic,
    retryable -32603; other requests keep working; when the database is back the pool
    reconnects by itself and nothing committed is lost. (The lease must outlast the time a
    worker needs to reach the database again after it returns; 10 s here.)"""
    records = records_in(tmp_path)
    with (
        running_cluster() as database,
        two_instances(database.new_database(), records, lease=10) as (a, b),
    ):
        await warm(a, 2)
        await warm(b, 2)  # every worker is up before the database goes
        kept = await a.create("asker", "kept")
        await a.until(kept, "input_required")
        database.stop("fast")
        body, headers = mcp_request("tasks/get", {"taskId": kept}, capabilities=TASKS)
        headers.append(("mcp-name", kept))
        with trio.fail_after(30):
            lost = await request(b.port, body, headers)
        assert lost.status == 503
        assert lost.messages[-1]["error"] == {
            "code": -32603,
            "message": "Shared state is unavailable; retry later",
            "data": {"retryable": True},
        }
        for server in (a, b):  # requests that need no database are served meanwhile
            assert await server.whoami() > 0
        database.start()
        with trio.fail_after(30):
            while True:
                response = await request(b.port, body, headers)
                if response.status == 200:
                    break
                await trio.sleep(0.2)
        assert response.messages[-1]["result"]["status"] == "input_required"
        await b.task("tasks/update", kept, inputResponses={"go": YES})
        assert (await b.until(kept, "completed"))["status"] == "completed"
        logs = a.served.log() + b.served.log()
        assert "Traceback" not in logs
        assert str(database.base) not in lost.body.decode(), "the answer named the database"
