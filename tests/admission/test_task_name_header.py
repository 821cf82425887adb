"""``tasks/*`` without ``Mcp-Name``: refused by default (the client MUST send it), admitted by
``TasksExtension(require_name_header=False)`` for today's Python SDK and FastMCP clients,
which do not send it yet. A header that is present and wrong is refused either way."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from presa_trio import Context, Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, open_client

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}


def server(strict: bool) -> Server:
    built = Server("names", "1")
    built.add_extension(TasksExtension(require_name_header=strict))

    @built.tool(options={"tasks": "required"})
    async def ask(ctx: Context) -> str:
        """Asks once."""
        answer = await ctx.input({"go": elicit("Go?", {"go": {"type": "boolean"}})})
        return f"go={answer['go']['content']['go']}"

    return built


def headers(client: Client, message: dict[str, Any], name: str | None) -> list[tuple[str, str]]:
    kept = [(k, v) for k, v in client.headers_for(message) if k != "mcp-name"]
    return kept if name is None else [*kept, ("mcp-name", name)]


async def send(client: Client, method: str, params: dict[str, Any], name: str | None) -> Any:
    message = client.message(method, params)
    return await client.send(message, headers(client, message, name))


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_strict_by_default(method: str) -> None:
    async with open_client(server(strict=True), capabilities=TASKS) as client:
        task_id = await client.create_task("ask")
        params: dict[str, Any] = {"taskId": task_id}
        if method == "tasks/update":
            params["inputResponses"] = {"go": {"action": "accept", "content": {"go": True}}}
        answer = await send(client, method, params, None)
        assert answer.status == 400
        assert answer.response is not None
        assert answer.response["error"] == {"code": -32020, "message": "Missing Mcp-Name header"}


async def test_lenient_admits_a_missing_header_and_still_refuses_a_wrong_one() -> None:
    async with open_client(server(strict=False), capabilities=TASKS) as client:
        task_id = await client.create_task("ask")
        got = await send(client, "tasks/get", {"taskId": task_id}, None)
        assert got.status == 200
        assert got.response is not None and got.response["result"]["taskId"] == task_id
        wrong = await send(client, "tasks/get", {"taskId": task_id}, "another-task")
        assert wrong.status == 400
        assert wrong.response is not None
        assert wrong.response["error"] == {
            "code": -32020,
            "message": f"Mcp-Name header 'another-task' does not match {task_id!r}",
        }
        yes = {"go": {"action": "accept", "content": {"go": True}}}
        with trio.fail_after(5):
            await client.wait_task(task_id, ("input_required",))
        update = {"taskId": task_id, "inputResponses": yes}
        assert (await send(client, "tasks/update", update, None)).status == 200
        with trio.fail_after(5):
            done = await client.wait_task(task_id)
        assert done["result"]["content"] == [{"type": "text", "text": "go=True"}]
        cancelled = await send(client, "tasks/cancel", {"taskId": task_id}, None)
        assert cancelled.status == 200
