"""A 2025-11-25 stream cut mid-call and resumed on another worker, with the published ``mcp``
1.x client: two server processes on one SQLite file, and two on one PostgreSQL database, behind
a balancer that cuts the call's stream after its second message and sends the client's
reconnection (``Last-Event-ID``) to the other process. The client gets every message once, in
order, then the answer of the process that ran the call."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from support.cutting_balancer import Journal, balance
from support.postgres_cluster import Cluster as Database
from support.published_clients import run_script
from support.servers import SUPPORT, running

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/resume.db"
    database: Database = request.getfixturevalue("postgres")
    return database.new_database()


async def test_a_cut_stream_is_resumed_on_the_other_worker(store: str, mcp1_python: Path) -> None:
    env = {"PRESA_STORE": store}
    with (
        running("sessions_app:app", SUPPORT, env=env) as a,
        running("sessions_app:app", SUPPORT, env=env) as b,
    ):
        journal = Journal()
        async with trio.open_nursery() as nursery:
            port = await nursery.start(balance, [a.port, b.port], b"cut-here", journal)
            url = f"http://127.0.0.1:{port}/mcp"
            seen = await trio.to_thread.run_sync(
                run_script, mcp1_python, "mcp1_resume_client.py", url
            )
            nursery.cancel_scope.cancel()
    assert seen["version"] == "2025-11-25"
    assert seen["logs"] == ["m1", "m2 cut-here", "m3", "m4"]
    text = seen["result"]["content"][0]["text"]
    assert text.startswith("relayed pid=") and seen["result"].get("isError") is not True
    assert journal.cut_port in (a.port, b.port)
    resumed = journal.resumed_on()
    assert resumed and all(port != journal.cut_port for port in resumed)
