"""A plain ``tools/call`` touches no database: on SQLite and PostgreSQL, with the Tasks extension
declared, calls served directly run no statement (counted by ``Tally``), while a task does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from presa_trio import Server
from presa_trio._backends.postgres import PostgresDatabase
from presa_trio._backends.sqlite import SqliteDatabase
from presa_trio._backends.tally import Tally
from presa_trio.backends import SqlBacked
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import open_client

TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
CALLS = 50
# A lease of an hour: the worker's heartbeat (a write every quarter lease) stays out of it.
QUIET = "lease=3600"


def build() -> Server:
    server = Server("plain", "1")
    server.add_extension(TasksExtension(poll_interval_ms=10))

    @server.tool()
    async def echo(text: str) -> str:
        """A plain tool: never a task."""
        await trio.lowlevel.checkpoint()
        return text

    @server.tool(options={"tasks": "optional"})
    async def either(text: str) -> str:
        """A task if the client asks for one; served directly otherwise."""
        await trio.lowlevel.checkpoint()
        return text

    return server


def store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "postgresql":
        return f"{request.getfixturevalue('postgres').new_database()}&{QUIET}"
    return f"sqlite:///{tmp_path}/state.db?{QUIET}"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_plain_tool_calls_run_no_statement_and_a_task_does(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build().asgi_app(backend=store(kind, tmp_path, request))
    async with open_client(app, capabilities=TASKS) as client:
        assert app.runtime is not None
        backend = app.runtime.backend
        assert isinstance(backend, SqlBacked)
        # the first task: the store's tables exist, its first-use work is done
        first = await client.create_task("either", {"text": "warm"})
        with trio.fail_after(10):
            await client.wait_task(first)
        db = backend.db
        assert isinstance(db, SqliteDatabase | PostgresDatabase)
        tally = db.tally = Tally()

        for n in range(CALLS):
            # a client that declares Tasks, calling a plain tool
            result = await client.call_tool("echo", {"text": f"a{n}"})
            assert result["content"] == [{"type": "text", "text": f"a{n}"}]
            # a client that does not, calling a task-optional tool: served directly
            result = await client.call_tool("either", {"text": f"b{n}"}, capabilities={})
            assert result["content"] == [{"type": "text", "text": f"b{n}"}]
            assert "taskId" not in result
        assert tally.counts() | {"looks": 0} == {
            "calls": 0, "writes": 0, "statements": 0, "looks": 0,
        }  # fmt: skip

        # the count counts: one task's creation writes to the store
        task_id = await client.create_task("either", {"text": "c"})
        with trio.fail_after(10):
            done = await client.wait_task(task_id)
        assert done["status"] == "completed"
        counts = tally.counts()
        assert counts["writes"] >= 1 and counts["statements"] > counts["writes"]
