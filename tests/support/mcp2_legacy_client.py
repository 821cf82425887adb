"""Drive the clients app (tests/support/clients_app.py) with the test venv's ``mcp`` 2.x client.

``python mcp2_legacy_client.py MODE TARGET``: MODE is the client's ``mode=`` (``legacy``: the
``initialize`` handshake; ``auto``: its default, which probes ``server/discover`` first), TARGET
is JSON as for tests/support/mcp1_client.py. In ``legacy`` mode it exercises what
mcp1_client.py does and prints the same shape; in ``auto`` mode only the version it landed on,
the tools and a call. On HTTP it also prints the ``Mcp-Session-Id`` the server gave (read off
the responses by an httpx2 event hook: the 2.x ``Client`` does not expose it), ended by the
DELETE the transport sends when it closes.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters, types
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

WATCHED = "test://watched"
WAIT = 60.0  # seconds for anything the server is to send (a bound, not a pace)

# logging/setLevel, ping and resources/subscribe are the older era's: deprecated in 2.x, served.
warnings.simplefilter("ignore", MCPDeprecationWarning)


def dump(model: Any) -> dict[str, Any]:
    found: dict[str, Any] = model.model_dump(mode="json", exclude_none=True, by_alias=True)
    return found


class Seen:
    """What the server sent the client besides answers. The 2.x dispatcher runs notification
    handlers (progress, logs) as tasks of their own, which may end after the answer they came
    before: ``until`` waits, bounded, for as many as are expected."""

    def __init__(self) -> None:
        self.sampling: list[dict[str, Any]] = []
        self.elicitation: list[dict[str, Any]] = []
        self.progress: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []
        self.list_changed = False
        self.changed = anyio.Event()

    async def until(self, enough: Callable[[], bool]) -> None:
        with anyio.fail_after(WAIT):
            while not enough():
                self.changed = anyio.Event()
                await self.changed.wait()

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.sampling.append(dump(params))
        prompt = params.messages[0].content
        said = prompt.text if isinstance(prompt, types.TextContent) else "?"
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"echo of {said!r}"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.elicitation.append(dump(params))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(dump(params))
        self.changed.set()

    async def step(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append({"progress": progress, "total": total, "message": message})
        self.changed.set()

    async def message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            raise message
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updates.append(dump(message.params))
            self.changed.set()
        elif isinstance(message, types.ToolListChangedNotification):
            self.list_changed = True
            self.changed.set()


def texts(result: types.CallToolResult) -> list[dict[str, Any]]:
    return [block.model_dump(mode="json", exclude_none=True) for block in result.content]


async def exercise(client: Client, seen: Seen) -> dict[str, Any]:
    initialized = client.session.initialize_result
    assert initialized is not None, "no initialize handshake"
    tools = await client.list_tools()
    whoami = await client.call_tool("whoami", {})
    era = await client.call_tool("era", {})
    ask = await client.call_tool("ask_model", {"prompt": "Say hi"})
    greet = await client.call_tool("greet", {})
    steps = await client.call_tool("steps", {}, progress_callback=seen.step)
    await seen.until(lambda: len(seen.progress) >= 3)
    ping = await client.send_ping()
    await client.set_logging_level("info")
    chatty = await client.call_tool("chatty", {})
    await seen.until(lambda: len(seen.logs) >= 2)
    await client.subscribe_resource(WATCHED)
    # The change stream (the GET stream, or stdout) may start listening for the new
    # subscription a moment after the answer: touch until an update arrives, each wait bounded.
    touches = 0
    with anyio.fail_after(WAIT):
        while not seen.updates:
            touched = await client.call_tool("touch", {"uri": WATCHED})
            touches += 1
            with anyio.move_on_after(1.0):
                await seen.until(lambda: bool(seen.updates))
    await seen.until(lambda: seen.list_changed)  # touch announced that too, after the update
    return {
        "client": f"mcp {version('mcp')} mode=legacy",
        "protocol_version": client.protocol_version,
        "initialize_version": initialized.protocol_version,
        "server_info": dump(initialized.server_info),
        "capabilities": dump(initialized.capabilities),
        "tools": [tool.name for tool in tools.tools],
        "whoami": texts(whoami),
        "era": texts(era),
        "ask_model": texts(ask),
        "sampling": seen.sampling,
        "greet": texts(greet),
        "elicitation": seen.elicitation,
        "steps": texts(steps),
        "progress": seen.progress,
        "ping": dump(ping),
        "chatty": texts(chatty),
        "logs": seen.logs,
        "touch": texts(touched),
        "touches": touches,
        "update": seen.updates[0],
        "tools_list_changed": seen.list_changed,
        "errors": [name for name, r in (("whoami", whoami), ("era", era), ("ask_model", ask),
                   ("greet", greet), ("steps", steps), ("chatty", chatty)) if r.is_error],
    }  # fmt: skip


async def glance(client: Client, seen: Seen) -> dict[str, Any]:
    """What ``mode="auto"`` lands on: no handshake, the 2026-07-28 dialect."""
    tools = await client.list_tools()
    whoami = await client.call_tool("whoami", {})
    era = await client.call_tool("era", {})
    return {
        "client": f"mcp {version('mcp')} mode=auto",
        "protocol_version": client.protocol_version,
        "handshake": client.session.initialize_result is not None,
        "tools": [tool.name for tool in tools.tools],
        "whoami": texts(whoami),
        "era": texts(era),
    }


async def main(mode: str, target: dict[str, Any]) -> dict[str, Any]:
    seen = Seen()
    session_ids: list[str] = []

    async def note_session(response: httpx2.Response) -> None:
        found = response.headers.get("mcp-session-id")
        if found is not None and found not in session_ids:
            session_ids.append(found)

    async with AsyncExitStack() as stack:
        server: Any
        if "url" in target:
            http = await stack.enter_async_context(create_mcp_http_client())
            http.event_hooks["response"].append(note_session)
            server = streamable_http_client(target["url"], http_client=http)
        else:
            server = StdioServerParameters(
                command=target["command"],
                args=target["args"],
                env=target["env"],
                cwd=target["cwd"],
            )
        run: Callable[[Client, Seen], Awaitable[dict[str, Any]]]
        run = exercise if mode == "legacy" else glance
        async with Client(
            server,
            mode=mode,
            sampling_callback=seen.sample,
            elicitation_callback=seen.elicit,
            logging_callback=seen.log,
            message_handler=seen.message,
        ) as client:
            seen_all = await run(client, seen)
        # the transport is closed: on HTTP, the session was DELETEd
        seen_all["session_ids"] = session_ids if "url" in target else None
    return seen_all


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1], json.loads(sys.argv[2]))))
