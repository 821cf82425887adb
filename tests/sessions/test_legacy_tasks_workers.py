"""2025-11-25 tasks on three server processes sharing one store (SQLite, PostgreSQL), every
message on a fresh connection to the worker the test picks: a task runs where it was
created; its question reaches the client on a ``tasks/result`` waiting on another worker,
and the answer POSTed to a third reaches the task; ``tasks/cancel`` from another worker
cancels it where it runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import trio
from support.postgres_cluster import Cluster
from support.servers import SUPPORT, Served, running
from support.session_http import call, open_session, post, streaming

pytestmark = pytest.mark.e2e

RELATED = "io.modelcontextprotocol/related-task"
ANSWER = {"action": "accept", "content": {"name": "Ada"}}


@pytest.fixture(params=["sqlite", "postgresql"])
def workers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Served, Served, Served]]:
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path}/tasks.db"
    else:
        cluster: Cluster = request.getfixturevalue("postgres")
        store = cluster.new_database()
    with ExitStack() as stack:
        env = {"PRESA_STORE": store}
        a, b, c = (
            stack.enter_context(running("legacy_tasks_app:app", SUPPORT, env=env)) for _ in "abc"
        )
        yield a, b, c


def pid_of(served: Served) -> int:
    """The worker process of a ``python -m hypercorn`` supervisor."""
    children = Path(f"/proc/{served.process.pid}/task/{served.process.pid}/children")
    for child in children.read_text().split():
        if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    raise AssertionError(f"no worker process under {served.process.pid}")


async def create(port: int, session: str, tool: str) -> str:
    created = await call(port, session, "tools/call", {"name": tool, "arguments": {}, "task": {}})
    task_id: str = created["result"]["task"]["taskId"]
    return task_id


async def test_a_question_reaches_a_result_waiting_elsewhere_and_its_answer_the_task(
    workers: tuple[Served, Served, Served],
) -> None:
    a, b, c = workers
    with trio.fail_after(30):
        session = await open_session(a.port)
        task_id = await create(a.port, session, "greet")
        waiting = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tasks/result",
            "params": {"taskId": task_id},
        }
        async with streaming(b.port, session, waiting) as stream:
            pushed = await stream.next_message()
            while "id" not in pushed:  # status notifications first, maybe
                pushed = await stream.next_message()
            assert pushed["method"] == "elicitation/create"
            assert pushed["params"]["_meta"] == {RELATED: {"taskId": task_id}}
            answer = {"jsonrpc": "2.0", "id": pushed["id"], "result": ANSWER}
            assert (await post(c.port, session, answer)).status == 202
            final = await stream.next_message()
            while "id" not in final:
                final = await stream.next_message()
    assert final["result"]["content"][0]["text"] == f"Hello, Ada! pid={pid_of(a)}"
    assert final["result"]["_meta"] == {RELATED: {"taskId": task_id}}
    got = await call(c.port, session, "tasks/get", {"taskId": task_id})
    assert got["result"]["status"] == "completed"


async def test_a_cancel_from_another_worker_stops_the_task_where_it_runs(
    workers: tuple[Served, Served, Served],
) -> None:
    a, b, c = workers
    with trio.fail_after(30):
        session = await open_session(a.port)
        task_id = await create(a.port, session, "sleeper")
        cancelled = await call(b.port, session, "tasks/cancel", {"taskId": task_id})
        assert cancelled["result"]["status"] == "cancelled"
        again = await call(c.port, session, "tasks/cancel", {"taskId": task_id})
        assert again["error"]["code"] == -32602
        listed = await call(c.port, session, "tasks/list", {})
        assert [t["taskId"] for t in listed["result"]["tasks"]] == [task_id]
        ran = await create(c.port, session, "whoami")
        result = await call(a.port, session, "tasks/result", {"taskId": ran})
        assert result["result"]["structuredContent"] == {"result": pid_of(c)}
