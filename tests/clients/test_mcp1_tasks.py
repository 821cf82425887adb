"""The published ``mcp`` 1.x client's experimental tasks API against 2025-11-25 sessions:
task creation, polling, the blocking result with its related-task ``_meta``, the list in
pages scoped to the principal, cancellation, and a question asked while the client waits
on ``tasks/result``, answered by its elicitation callback. On one instance in memory, and
on two instances behind a round-robin balancer sharing SQLite or PostgreSQL, where the
task, the waiting request and the client's answer each reach either instance."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from support.postgres_cluster import Cluster
from support.published_clients import run_script
from support.round_robin import balance
from support.servers import SUPPORT, running

pytestmark = pytest.mark.e2e

RELATED = "io.modelcontextprotocol/related-task"


@contextmanager
def instances(store: str | None, count: int) -> Iterator[list[int]]:
    env = {"PRESA_STORE": store} if store else {}
    with ExitStack() as stack:
        yield [
            stack.enter_context(running("legacy_tasks_app:app", SUPPORT, env=env)).port
            for _ in range(count)
        ]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def ports(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[int]]:
    if request.param == "memory":
        with instances(None, 1) as one:
            yield one
        return
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path}/tasks.db"
    else:
        cluster: Cluster = request.getfixturevalue("postgres")
        store = cluster.new_database()
    with instances(store, 2) as two:
        yield two


async def test_the_mcp1_client_runs_tasks_on_sessions(mcp1_python: Path, ports: list[int]) -> None:
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(balance, ports)
            target = json.dumps({"url": f"http://127.0.0.1:{port}/mcp"})
            seen: dict[str, Any] = await trio.to_thread.run_sync(
                run_script, mcp1_python, "mcp1_tasks_client.py", target
            )
            nursery.cancel_scope.cancel()
    assert seen["capabilities"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert seen["task_support"] == {
        "add": "optional",
        "boom": "optional",
        "greet": "required",
        "plain": None,
        "sleeper": "required",
        "whoami": "optional",
    }
    created = seen["created"]["task"]
    assert (created["status"], created["ttl"], created["pollInterval"]) == ("working", 60_000, 250)
    assert seen["polled"][-1] == "completed"
    result = seen["result"]
    assert result["structuredContent"] == {"result": 3}
    assert result["_meta"] == {RELATED: {"taskId": created["taskId"]}}
    assert len(set(seen["pids"])) == len(ports)  # tasks ran on every instance
    assert seen["pages"] == 4  # 1 + 6 tasks so far, 2 a page
    assert len(seen["listed"]) == len(set(seen["listed"])) == 7
    assert created["taskId"] in seen["listed"]
    assert seen["cancelled"]["status"] == "cancelled"
    assert seen["cancel_again"]["code"] == seen["cancel_ended"]["code"] == -32602
    greeted = seen["greeted"]
    assert greeted["content"][0]["text"].startswith("Hello, Ada!")
    assert greeted["_meta"] == {RELATED: {"taskId": seen["greet_task"]}}
    (asked,) = seen["elicitation"]
    assert asked["_meta"] == {RELATED: {"taskId": seen["greet_task"]}}
    assert asked["message"] == "What is your name?"
    assert seen["eve_list"] == []
    assert seen["eve_get"] == seen["eve_unknown"] == seen["eve_result"]
    assert seen["eve_get"]["code"] == -32602
