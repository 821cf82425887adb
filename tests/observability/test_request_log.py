"""Log records written while serving a request name it: ``RequestFilter`` adds the request
id and method, also in worker threads, child tasks and the tasks a request created."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import trio

from presa_trio import RequestFilter, Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import open_client

log = logging.getLogger("presa_trio.tests.requestlog")
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.addFilter(RequestFilter())
        self.seen: list[tuple[str, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((record.getMessage(), record.request_id, record.mcp_method))  # type: ignore[attr-defined]


@pytest.fixture
def kept() -> Iterator[Kept]:
    handler = Kept()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    yield handler
    log.removeHandler(handler)


async def test_records_name_the_request(kept: Kept) -> None:
    server = Server("logged")
    server.add_extension(TasksExtension())

    @server.tool()
    async def loud() -> str:
        """Logs on the loop and from a child task."""
        log.info("on the loop")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: trio.to_thread.run_sync(log.info, "in a thread"))
        return "ok"

    @server.tool(options={"tasks": "required"})
    async def background() -> str:
        """Logs as a task."""
        await trio.lowlevel.checkpoint()
        log.info("as a task")
        return "ok"

    async with open_client(server, capabilities=TASKS) as client:
        message = client.message("tools/call", {"name": "loud", "arguments": {}}, request_id=7)
        await client.send(message)
        created = client.message(
            "tools/call", {"name": "background", "arguments": {}}, request_id="c"
        )
        task_id = (await client.send(created)).response["result"]["taskId"]  # type: ignore[index]
        with trio.fail_after(5):
            await client.wait_task(task_id)
    log.info("outside")
    assert kept.seen == [
        ("on the loop", "7", "tools/call"),
        ("in a thread", "7", "tools/call"),
        ("as a task", "c", "tools/call"),
        ("outside", "-", "-"),
    ]
