"""Drive tests/support/legacy_tasks_app.py with the published ``mcp`` 1.x client's
experimental tasks API (2025-11-25 sessions).

Run by the interpreter of its own virtualenv (tests/support/client_installs.py):
``python mcp1_tasks_client.py TARGET``, where TARGET is JSON ``{"url": ...}``. Every HTTP
request goes on a fresh connection (no keep-alive), so behind a round-robin balancer
consecutive requests reach different instances. It prints one JSON object describing what
the client saw; the test checks it.
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError

WAIT = 60.0  # seconds for the whole exercise (a bound, not a pace)
WHOAMI_TASKS = 6  # tasks of ``whoami``: behind a balancer, they run on every instance


class Seen:
    def __init__(self) -> None:
        self.elicitation: list[dict[str, Any]] = []
        self.statuses: list[str] = []

    async def elicit(
        self, context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.elicitation.append(params.model_dump(mode="json", exclude_none=True, by_alias=True))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def message(self, message: Any) -> None:
        if isinstance(message, Exception):
            raise message
        if isinstance(message, types.ServerNotification):
            root = message.root
            if isinstance(root, types.TaskStatusNotification):
                self.statuses.append(root.params.status)


def dump(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(mode="json", exclude_none=True, by_alias=True)
    return out


async def error_of(call: Any) -> dict[str, Any]:
    try:
        await call
    except McpError as error:
        return {"code": error.error.code, "message": error.error.message}
    return {}


async def open_session(stack: AsyncExitStack, url: str, tenant: str, seen: Seen) -> ClientSession:
    http = await stack.enter_async_context(
        httpx.AsyncClient(
            headers={"mcp-tenant": tenant},
            limits=httpx.Limits(max_keepalive_connections=0),
            timeout=httpx.Timeout(WAIT),
        )
    )
    read, write, _ = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(
        ClientSession(read, write, elicitation_callback=seen.elicit, message_handler=seen.message)
    )
    return session


async def exercise(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    seen = Seen()
    async with AsyncExitStack() as stack:
        session = await open_session(stack, url, "ada", seen)
        initialized = await session.initialize()
        out["capabilities"] = dump(initialized.capabilities).get("tasks")
        tools = (await session.list_tools()).tools
        out["task_support"] = {
            t.name: t.execution.taskSupport if t.execution else None for t in tools
        }
        tasks = session.experimental

        # create, poll, and the result with its related-task _meta
        created = await tasks.call_tool_as_task("add", {"a": 1, "b": 2}, ttl=60_000)
        out["created"] = dump(created)
        task_id = created.task.taskId
        out["polled"] = [status.status async for status in tasks.poll_task(task_id)]
        result = await tasks.get_task_result(task_id, types.CallToolResult)
        out["result"] = dump(result)

        # tasks of every instance, and the list in pages (the app's page is 2)
        made = [await tasks.call_tool_as_task("whoami", {}) for _ in range(WHOAMI_TASKS)]
        pids = []
        for each in made:  # created one after the other: on alternate instances
            ran = await tasks.get_task_result(each.task.taskId, types.CallToolResult)
            pids.append(ran.structuredContent["result"])  # type: ignore[index]
        out["pids"] = pids
        listed, cursor, pages = [], None, 0
        while True:
            page = await tasks.list_tasks(cursor)
            pages += 1
            listed += [task.taskId for task in page.tasks]
            cursor = page.nextCursor
            if cursor is None:
                break
        out["listed"], out["pages"] = listed, pages

        # cancel, and cancel of a task that has ended
        sleeping = await tasks.call_tool_as_task("sleeper", {})
        cancelled = await tasks.cancel_task(sleeping.task.taskId)
        out["cancelled"] = dump(cancelled)
        out["cancel_again"] = await error_of(tasks.cancel_task(sleeping.task.taskId))
        out["cancel_ended"] = await error_of(tasks.cancel_task(task_id))

        # a question asked while the client waits on tasks/result
        asking = await tasks.call_tool_as_task("greet", {})
        greeted = await tasks.get_task_result(asking.task.taskId, types.CallToolResult)
        out["greeted"] = dump(greeted)
        out["greet_task"] = asking.task.taskId
        out["elicitation"] = seen.elicitation
        out["statuses"] = seen.statuses

        # another principal sees none of it
        eve = await open_session(stack, url, "eve", Seen())
        await eve.initialize()
        out["eve_list"] = [task.taskId for task in (await eve.experimental.list_tasks()).tasks]
        out["eve_get"] = await error_of(eve.experimental.get_task(task_id))
        out["eve_unknown"] = await error_of(eve.experimental.get_task("no-such-task"))
        out["eve_result"] = await error_of(
            eve.experimental.get_task_result(task_id, types.CallToolResult)
        )
    return out


async def main() -> None:
    target = json.loads(sys.argv[1])
    with anyio.fail_after(WAIT):
        seen = await exercise(target["url"])
    print(json.dumps(seen))


if __name__ == "__main__":
    anyio.run(main)
