"""Drive the clients app (tests/support/clients_app.py) with the published ``mcp`` 1.x client.

Run by the interpreter of its own virtualenv (tests/support/client_installs.py), never the test
venv's (which holds ``mcp`` 2.x): ``python mcp1_client.py TARGET``, where TARGET is JSON,
``{"url": ...}`` for streamable HTTP or ``{"command": ..., "args": [...], "env": {...},
"cwd": ...}`` for stdio. It prints one JSON object describing what the client saw (what
tests/support/published_clients.py checks); on HTTP with the session id it was given, which
the client ends with a DELETE when its transport closes.
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext
from mcp.shared.session import RequestResponder
from pydantic import AnyUrl

WATCHED = "test://watched"
WAIT = 60.0  # seconds for anything the server is to send (a bound, not a pace)


class Seen:
    """What the server sent the client besides answers."""

    def __init__(self) -> None:
        self.sampling: list[dict[str, Any]] = []
        self.elicitation: list[dict[str, Any]] = []
        self.progress: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []
        self.updated = anyio.Event()
        self.list_changed = anyio.Event()

    async def sample(
        self, context: RequestContext[ClientSession, Any], params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.sampling.append(params.model_dump(mode="json", exclude_none=True, by_alias=True))
        prompt = params.messages[0].content
        said = prompt.text if isinstance(prompt, types.TextContent) else "?"
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"echo of {said!r}"),
            model="test-model",
            stopReason="endTurn",
        )

    async def elicit(
        self, context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.elicitation.append(params.model_dump(mode="json", exclude_none=True, by_alias=True))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params.model_dump(mode="json", exclude_none=True, by_alias=True))

    async def step(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append({"progress": progress, "total": total, "message": message})

    async def message(
        self,
        message: RequestResponder[types.ServerRequest, types.ClientResult]
        | types.ServerNotification
        | Exception,
    ) -> None:
        if isinstance(message, Exception):
            raise message
        if not isinstance(message, types.ServerNotification):
            return
        root = message.root
        if isinstance(root, types.ResourceUpdatedNotification):
            self.updates.append(root.params.model_dump(mode="json", exclude_none=True))
            self.updated.set()
        elif isinstance(root, types.ToolListChangedNotification):
            self.list_changed.set()


def texts(result: types.CallToolResult) -> list[dict[str, Any]]:
    return [block.model_dump(mode="json", exclude_none=True) for block in result.content]


async def exercise(session: ClientSession, seen: Seen) -> dict[str, Any]:
    initialized = await session.initialize()
    tools = await session.list_tools()
    whoami = await session.call_tool("whoami", {})
    era = await session.call_tool("era", {})
    ask = await session.call_tool("ask_model", {"prompt": "Say hi"})
    greet = await session.call_tool("greet", {})
    steps = await session.call_tool("steps", {}, progress_callback=seen.step)
    ping = await session.send_ping()
    await session.set_logging_level("info")
    chatty = await session.call_tool("chatty", {})
    await session.subscribe_resource(AnyUrl(WATCHED))
    # The change stream (the GET stream, or stdout) may start listening for the new
    # subscription a moment after the answer: touch until an update arrives, each wait bounded.
    touches = 0
    with anyio.fail_after(WAIT):
        while not seen.updated.is_set():
            touched = await session.call_tool("touch", {"uri": WATCHED})
            touches += 1
            with anyio.move_on_after(1.0):
                await seen.updated.wait()
        await seen.list_changed.wait()  # touch announced that too, after the update
    return {
        "client": f"mcp {version('mcp')}",
        "protocol_version": initialized.protocolVersion,
        "server_info": initialized.serverInfo.model_dump(mode="json", exclude_none=True),
        "capabilities": initialized.capabilities.model_dump(mode="json", exclude_none=True),
        "tools": [tool.name for tool in tools.tools],
        "whoami": texts(whoami),
        "era": texts(era),
        "ask_model": texts(ask),
        "sampling": seen.sampling,
        "greet": texts(greet),
        "elicitation": seen.elicitation,
        "steps": texts(steps),
        "progress": seen.progress,
        "ping": ping.model_dump(mode="json", exclude_none=True),
        "chatty": texts(chatty),
        "logs": seen.logs,
        "touch": texts(touched),
        "touches": touches,
        "update": seen.updates[0],
        "tools_list_changed": seen.list_changed.is_set(),
        "errors": [name for name, r in (("whoami", whoami), ("era", era), ("ask_model", ask),
                   ("greet", greet), ("steps", steps), ("chatty", chatty)) if r.isError],
    }  # fmt: skip


async def main(target: dict[str, Any]) -> dict[str, Any]:
    seen = Seen()
    async with AsyncExitStack() as stack:
        if "url" in target:
            read, write, session_id = await stack.enter_async_context(
                streamable_http_client(target["url"])
            )
        else:
            server = StdioServerParameters(
                command=target["command"],
                args=target["args"],
                env=target["env"],
                cwd=target["cwd"],
            )
            read, write = await stack.enter_async_context(stdio_client(server))
            session_id = None
        session = await stack.enter_async_context(
            ClientSession(
                read,
                write,
                sampling_callback=seen.sample,
                elicitation_callback=seen.elicit,
                logging_callback=seen.log,
                message_handler=seen.message,
            )
        )
        seen_all = await exercise(session, seen)
        seen_all["session_id"] = session_id() if session_id is not None else None
    return seen_all  # the transport is closed: on HTTP, the session was DELETEd then


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, json.loads(sys.argv[1]))))
