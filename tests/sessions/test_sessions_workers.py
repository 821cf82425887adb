"""Older-era sessions on many workers and hosts: three server processes sharing one store
(SQLite on one host, PostgreSQL as for many), every message on a fresh connection to a worker
the test picks. A session opened on one is served by all; what is live on one (a tool waiting
for an answer, a running call, a GET stream) is reached from the others."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import trio
from support.postgres_cluster import Cluster as Database
from support.servers import SUPPORT, Served, running
from support.session_http import call, delete, open_session, post, resuming, streaming

pytestmark = pytest.mark.e2e

ANSWER = {"action": "accept", "content": {"name": "Ada"}}


@contextmanager
def three_workers(store: str) -> Iterator[tuple[Served, Served, Served]]:
    with ExitStack() as stack:
        env = {"PRESA_STORE": store}
        a, b, c = (
            stack.enter_context(running("sessions_app:app", SUPPORT, env=env)) for _ in "abc"
        )
        yield a, b, c


@pytest.fixture(params=["sqlite", "postgresql"])
def workers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Served, Served, Served]]:
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path}/sessions.db"
    else:
        database: Database = request.getfixturevalue("postgres")
        store = database.new_database()
    with three_workers(store) as served:
        yield served


def pid_of(served: Served) -> int:
    """The worker process of a ``python -m hypercorn`` supervisor (not its resource tracker)."""
    children = Path(f"/proc/{served.process.pid}/task/{served.process.pid}/children")
    for child in children.read_text().split():
        if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    raise AssertionError(f"no worker process under {served.process.pid}")


async def test_a_session_opened_on_one_worker_is_served_by_all(
    workers: tuple[Served, Served, Served],
) -> None:
    a, b, c = workers
    with trio.fail_after(30):
        session = await open_session(a.port)
        for served in (b, c, a):
            listed = await call(served.port, session, "tools/list", {})
            assert "greet" in [t["name"] for t in listed["result"]["tools"]]
            ran = await call(
                served.port, session, "tools/call", {"name": "whoami", "arguments": {}}
            )
            assert ran["result"]["structuredContent"] == {"result": pid_of(served)}


async def test_an_elicitation_answered_to_another_worker(
    workers: tuple[Served, Served, Served],
) -> None:
    a, b, _ = workers
    with trio.fail_after(30):
        session = await open_session(a.port)
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "greet", "arguments": {}},
        }
        async with streaming(a.port, session, message) as stream:
            pushed = await stream.next_message()
            assert pushed["method"] == "elicitation/create"
            taken = await post(
                b.port, session, {"jsonrpc": "2.0", "id": pushed["id"], "result": ANSWER}
            )
            assert taken.status == 202
            final = await stream.next_message()
    text = final["result"]["content"][0]["text"]
    assert text == f"Hello, Ada! state={{'asked': 'name'}} pid={pid_of(a)}"


async def test_notifications_cancelled_arriving_elsewhere_cancels_the_call(
    workers: tuple[Served, Served, Served],
) -> None:
    a, b, _ = workers
    with trio.fail_after(30):
        session = await open_session(a.port)
        params = {"name": "sleeper", "arguments": {}, "_meta": {"progressToken": "t"}}
        message = {"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": params}
        async with streaming(a.port, session, message) as stream:
            started = await stream.next_message()
            assert started["params"]["message"] == f"sleeping in {pid_of(a)}"
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": "long"},
            }
            assert (await post(b.port, session, cancel)).status == 202
            with trio.fail_after(5):
                final = await stream.next_message()
    assert final == {
        "jsonrpc": "2.0",
        "id": "long",
        "error": {"code": -32800, "message": "Request cancelled"},
    }


async def test_delete_on_one_worker_is_404_on_the_others(
    workers: tuple[Served, Served, Served],
) -> None:
    a, b, c = workers
    with trio.fail_after(30):
        session = await open_session(a.port)
        assert (await call(b.port, session, "ping", {}))["result"] == {}
        assert await delete(a.port, session) == 200
        for served in (b, c, a):
            gone = await post(served.port, session, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert gone.status == 404
            assert gone.messages[0]["error"] == {"code": -32001, "message": "Session not found"}
        assert await delete(c.port, session) == 404


async def test_subscribed_on_one_changed_on_another_delivered_on_a_third(
    workers: tuple[Served, Served, Served],
) -> None:
    a, b, c = workers
    with trio.fail_after(30):
        session = await open_session(a.port)
        async with streaming(c.port, session, method="GET") as stream:
            assert stream.status == 200
            subscribed = await call(
                a.port, session, "resources/subscribe", {"uri": "test://watched"}
            )
            assert subscribed["result"] == {}
            touched = await call(
                b.port,
                session,
                "tools/call",
                {"name": "touch", "arguments": {"uri": "test://watched"}},
            )
            assert touched["result"]["structuredContent"] == {"result": pid_of(b)}
            seen = {json.dumps(await stream.next_message(), sort_keys=True) for _ in range(2)}
        # The first GET is gone: once C has let its claim go, another may open.
        with trio.fail_after(5):
            second = await streaming_status(b.port, session)
            for _ in range(100):  # polling another process's store: no event to wait on
                if second != 409:
                    break
                await trio.sleep(0.05)
                second = await streaming_status(b.port, session)
        assert second == 200
    assert seen == {
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "test://watched"},
            },
            sort_keys=True,
        ),
        json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, sort_keys=True
        ),
    }


async def streaming_status(port: int, session: str) -> int:
    async with streaming(port, session, method="GET") as stream:
        return stream.status


async def test_a_second_get_on_another_worker_is_409(
    workers: tuple[Served, Served, Served],
) -> None:
    a, b, _ = workers
    with trio.fail_after(30):
        session = await open_session(a.port)
        async with streaming(a.port, session, method="GET") as first:
            assert first.status == 200
            async with streaming(b.port, session, method="GET") as second:
                assert second.status == 409


def test_the_processes_are_distinct(workers: tuple[Served, Served, Served]) -> None:
    assert len({pid_of(w) for w in workers}) == 3
    assert all(w.alive() for w in workers)
    assert os.getpid() not in {pid_of(w) for w in workers}


async def test_a_stream_whose_worker_is_lost_is_answered_by_its_resumer(tmp_path: Path) -> None:
    """The worker running a call dies (SIGKILL); the client resumes on another worker,
    which, once the lost worker's lease lapsed, answers the stream -32603 saying so, rather
    than leaving the client waiting for an answer that can never come."""
    env = {"PRESA_STORE": f"sqlite:///{tmp_path}/lost.db?lease=2"}
    with (
        running("sessions_app:app", SUPPORT, env=env) as a,
        running("sessions_app:app", SUPPORT, env=env) as b,
    ):
        with trio.fail_after(30):
            session = await open_session(b.port)
            params = {"name": "sleeper", "arguments": {}, "_meta": {"progressToken": "t"}}
            message = {"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": params}
            async with streaming(a.port, session, message) as stream:
                started = await stream.next_message()
                assert started["params"]["message"] == f"sleeping in {pid_of(a)}"
                last = stream.last_event_id
                os.kill(pid_of(a), signal.SIGKILL)
        assert last is not None and last.endswith("_1")
        with trio.fail_after(60):  # 15 s of quiet, then the lease (2 s) judged
            async with resuming(b.port, session, last) as resumed:
                assert resumed.status == 200
                final = await resumed.next_message()
    assert final == {
        "jsonrpc": "2.0",
        "id": "long",
        "error": {"code": -32603, "message": "The worker running this request was lost"},
    }
