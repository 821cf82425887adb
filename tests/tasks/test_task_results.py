"""A task's result as the wire writes it: one that is not JSON or past the size bound fails the
task; a UUID and an enum are written by their values."""

from __future__ import annotations

import enum
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from support.answers import nan_server, poll_until_terminal
from support.task_service import TASKS

from presa_trio import Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import open_client


@pytest.mark.parametrize("tool", ["not_json", "lone_surrogate", "opaque"])
async def test_a_task_result_that_is_not_json_fails_the_task(tool: str) -> None:
    async with open_client(nan_server(), capabilities=TASKS) as client:
        task_id = await client.create_task(tool)
        task, _ = await poll_until_terminal(client, task_id)
        assert task["status"] == "failed"
        assert task["error"] == {"code": -32603, "message": "Task result is not JSON"}
        assert "result" not in task
        for _ in range(3):  # and it reads back, as JSON, every time
            again = await client.get_task(task_id)
            assert client.last.status == 200 and again["status"] == "failed"


async def test_a_task_result_over_the_size_bound_fails_the_task() -> None:
    async with open_client(nan_server(max_result_bytes=1000), capabilities=TASKS) as client:
        small = await client.create_task("big", {"size": 100})
        task, _ = await poll_until_terminal(client, small)
        assert task["status"] == "completed"
        assert task["result"]["content"] == [{"type": "text", "text": "y" * 100}]
        large = await client.create_task("big", {"size": 5000})
        task, _ = await poll_until_terminal(client, large)
        assert task["status"] == "failed"
        assert task["error"] == {
            "code": -32603,
            "message": "Task result is larger than 1000 bytes",
        }


class Shade(enum.Enum):
    DARK = "dark"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_task_result_with_a_uuid_and_an_enum_is_json_as_the_wire_writes_it(
    store: str, tmp_path: Path
) -> None:
    """The wire writes a UUID as its text and an Enum by its value; a task's result is
    checked, and a SQL store keeps it, with that same writer, so such a result completes
    its task on every store, as it answers a plain call."""
    server = Server("typed", "1", loop_warning=None)
    server.add_extension(TasksExtension())

    @server.tool(options={"tasks": "optional"})
    async def ids() -> dict[str, Any]:
        """Returns a content block as is, a UUID and an Enum in its ``_meta``."""
        await trio.lowlevel.checkpoint()
        meta = {"id": uuid.UUID(int=1), "shade": Shade.DARK}
        return {"type": "text", "text": "ids", "_meta": meta}

    backend = f"sqlite:///{tmp_path}/tasks.db" if store == "sqlite" else None
    written = {"id": "00000000-0000-0000-0000-000000000001", "shade": "dark"}
    async with open_client(server, capabilities={}) as plain:
        direct = await plain.call_tool("ids")
        assert direct["content"] == [{"type": "text", "text": "ids", "_meta": written}]
    async with open_client(server.asgi_app(backend=backend), capabilities=TASKS) as client:
        task_id = await client.create_task("ids")
        task, _ = await poll_until_terminal(client, task_id)
        assert task["status"] == "completed", task
        assert task["result"]["content"] == [{"type": "text", "text": "ids", "_meta": written}]
