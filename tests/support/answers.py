"""Reading answers of the in-process client: the one JSON-RPC error of a result, a server that
still serves, the errors a test logged, a task polled to its end; and a server whose tools
return what JSON cannot carry."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio import Server, ToolResult, Validation, content
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import Client, HttpResult, drive
from support.asgi_scope import headers

V = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def only_error(result: HttpResult) -> dict[str, Any]:
    """The single, well-formed JSON-RPC error message of a plain JSON response."""
    assert result.headers["content-type"] == "application/json"
    assert result.headers["content-length"] == str(len(result.body))
    assert b"Traceback" not in result.body
    message = json.loads(result.body)  # well-formed JSON, not just what the helper parsed
    assert result.messages == [message]
    assert message["jsonrpc"] == "2.0"
    assert set(message) <= {"jsonrpc", "id", "error"}
    error: dict[str, Any] = message["error"]
    assert isinstance(error["message"], str) and error["message"]
    return error


async def still_serving(app: Any) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 99, "method": "server/discover", "params": {"_meta": META}}
    )
    after = await drive(app, body, headers())
    assert after.status == 200 and after.response is not None and "result" in after.response


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


def nan_server(**tasks_options: Any) -> Server:
    server = Server("nan", "1", validation=Validation(outbound=True), loop_warning=None)
    server.add_extension(TasksExtension(**tasks_options))

    @server.tool(options={"tasks": "optional"})
    async def not_json() -> ToolResult:
        """Returns NaN in its structured content."""
        await trio.lowlevel.checkpoint()
        return ToolResult(content=[content.text("nan")], structured={"x": float("nan")})

    @server.tool(options={"tasks": "optional"})
    async def lone_surrogate() -> str:
        """Returns a string with an unpaired surrogate: no UTF-8 encoding, so not JSON."""
        await trio.lowlevel.checkpoint()
        return "a\udc00b"

    @server.tool(options={"tasks": "optional"})
    async def opaque() -> ToolResult:
        """Returns an object no JSON writer knows in its ``_meta``."""
        await trio.lowlevel.checkpoint()
        return ToolResult(content=[content.text("opaque")], meta={"at": object()})

    @server.tool(options={"tasks": "optional"})
    async def big(size: int) -> str:
        """Returns ``size`` characters."""
        await trio.lowlevel.checkpoint()
        return "y" * size

    return server


async def poll_until_terminal(client: Client, task_id: str) -> tuple[dict[str, Any], list[str]]:
    """Poll tasks/get (each answer must be HTTP 200) until the task ends; the statuses seen."""
    seen: list[str] = []
    with trio.fail_after(10):
        while True:
            task = await client.get_task(task_id)
            assert client.last.status == 200
            seen.append(task["status"])
            if task["status"] in ("completed", "failed", "cancelled"):
                return task, seen
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(0.001)
