"""A bug in a tool (sync, async, or in a child task) is answered without its detail: ``-32603``
"Internal error" with HTTP 500 when called directly, a ``failed`` task with that error when run
as a task; the detail is logged once per failure."""

from __future__ import annotations

import json
import logging

import pytest
import trio
import trio.testing
from support.task_service import WITH_TASKS

from presa_trio import Server, Validation
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import open_client

INTERNAL = {"code": -32603, "message": "Internal error"}


def leaky_server(gates: list[trio.Event]) -> Server:
    """Tools with a bug, each failing once the newest gate opens."""
    server = Server("leaky", "1", validation=Validation(outbound=True))
    server.add_extension(TasksExtension())

    @server.tool(options={"tasks": "optional"})
    def sync_bug() -> str:
        """A bug in a sync tool (it runs in a worker thread)."""
        trio.from_thread.run(gates[-1].wait)
        raise RuntimeError("secret detail")

    @server.tool(options={"tasks": "optional"})
    async def async_bug() -> str:
        """A bug in an async tool."""
        await gates[-1].wait()
        raise RuntimeError("secret detail")

    @server.tool(options={"tasks": "optional"})
    async def child_bug() -> str:
        """A bug in a child task of an async tool (an exception group)."""

        async def child() -> None:
            await gates[-1].wait()
            raise RuntimeError("secret detail")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
        return "unreachable"

    return server


@pytest.mark.parametrize("tool", ["sync_bug", "async_bug", "child_bug"])
async def test_a_tool_bug_is_answered_without_its_detail(
    tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Directly: -32603 "Internal error", HTTP 500. As a task: ``failed`` with exactly that
    error. The detail is logged once per failure and appears in no response or notification."""
    caplog.set_level(logging.ERROR)
    gates = [trio.Event()]
    gates[-1].set()
    async with open_client(leaky_server(gates), capabilities=WITH_TASKS) as client:
        direct = await client.send(client.message("tools/call", {"name": tool}, capabilities={}))
        assert direct.status == 500
        assert direct.response is not None and direct.response["error"] == INTERNAL
        assert [r.getMessage() for r in caplog.records] == ["handling tools/call failed"]

        gates.append(trio.Event())
        created = await client.send(client.message("tools/call", {"name": tool}))
        assert created.response is not None
        task_id = created.response["result"]["taskId"]
        with trio.fail_after(5):
            async with client.listen({"taskIds": [task_id]}) as stream:
                await stream.next()  # the acknowledgement
                gates[-1].set()
                note = await stream.next()
                task = await client.wait_task(task_id)
                raw = await client.send(client.message("tasks/get", {"taskId": task_id}))
        assert task["status"] == "failed" and task["error"] == INTERNAL
        assert task["statusMessage"] == "Internal error" and "result" not in task
        assert note["method"] == "notifications/tasks"
        assert note["params"]["status"] == "failed" and note["params"]["error"] == INTERNAL
        for seen in (direct.body, created.body, raw.body, json.dumps(note).encode()):
            assert b"secret" not in seen and b"RuntimeError" not in seen
            assert b"Traceback" not in seen
        assert [r.getMessage() for r in caplog.records] == [
            "handling tools/call failed",
            f"task {task_id} failed",
        ]
        assert all("secret detail" in (r.exc_text or "") for r in caplog.records)
