"""The left column of docs/porting.md, run: each idiom written for the official SDK (``mcp``'s
``MCPServer``) and for FastMCP, served in process by that library and called by its own
client. ``python porting_sources.py`` prints one JSON object of what each idiom did;
``test_porting_sources.py`` checks it against the guide.

It runs in its own interpreter (asyncio: these libraries' event loop, away from the test's
trio loop). ``python porting_sources.py --stdio`` is the SDK server of ``mcp.run()``, which
the main run starts as a subprocess and calls over stdio.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import mcp_types
from fastmcp import Context as FastMCPContext
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field


class Note(BaseModel):
    title: Annotated[str, Field(min_length=1)]
    stars: int


class Confirm(BaseModel):
    ok: bool


RATE = {"note": {"title": "tea", "stars": "2"}, "times": "3"}  # strings for the ints


@asynccontextmanager
async def lifespan(server: Any) -> AsyncIterator[dict[str, Any]]:
    yield {"notes": {"1": "buy milk"}}


def on_a_worker_thread() -> bool:
    return threading.current_thread() is not threading.main_thread()


def sdk_server() -> Any:
    from mcp.server.mcpserver import MCPServer

    mcp = MCPServer("notes", lifespan=lifespan)

    @mcp.tool()
    async def rate(ctx: Context, note: Note, times: int) -> Note:
        """Typed parameters, converted laxly; a model back."""
        await ctx.report_progress(1, 2)
        return Note(title=note.title, stars=note.stars * times)

    @mcp.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Sure?", Confirm)
        return f"{answer.action} {answer.data.ok if answer.action == 'accept' else None}"

    @mcp.tool()
    async def sample(ctx: Context) -> str:
        text = mcp_types.TextContent(type="text", text="hi")
        message = mcp_types.SamplingMessage(role="user", content=text)
        answer = await ctx.session.create_message(messages=[message], max_tokens=5)
        return str(answer.content.text)

    @mcp.tool()
    def read_note(ctx: Context, note_id: str) -> str:
        return str(ctx.request_context.lifespan_context["notes"][note_id])

    @mcp.tool()
    def threaded() -> bool:
        return on_a_worker_thread()

    @mcp.tool()
    def plain() -> str:
        return "text"

    return mcp


def fastmcp_server() -> Any:
    from fastmcp import FastMCP

    mcp = FastMCP("notes", lifespan=lifespan)

    @mcp.tool()
    async def rate(ctx: FastMCPContext, note: Note, times: int) -> Note:
        await ctx.report_progress(1, 2)
        return Note(title=note.title, stars=note.stars * times)

    @mcp.tool()
    def read_note(ctx: FastMCPContext, note_id: str) -> str:
        return str(ctx.lifespan_context["notes"][note_id])

    @mcp.tool()
    def threaded() -> bool:
        return on_a_worker_thread()

    return mcp


def text(result: Any) -> str:
    return str(result.content[0].text)


async def with_sdk() -> dict[str, Any]:
    from mcp import Client, StdioServerParameters
    from mcp.server.auth.provider import AccessToken, TokenVerifier
    from mcp.server.auth.settings import AuthSettings

    mcp = sdk_server()
    progress: list[Any] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append([done, total])

    async def on_elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="accept", content={"ok": True})

    async def on_sample(context: Any, params: Any) -> mcp_types.CreateMessageResult:
        answer = mcp_types.TextContent(type="text", text="sampled")
        return mcp_types.CreateMessageResult(role="assistant", content=answer, model="m")

    seen: dict[str, Any] = {}
    async with Client(mcp) as client:  # the in-memory client, on 2026-07-28
        rated = await client.call_tool("rate", RATE, progress_callback=on_progress)
        seen["rate"] = rated.structured_content
        seen["progress"] = progress
        seen["read_note"] = text(await client.call_tool("read_note", {"note_id": "1"}))
        seen["threaded"] = rated_bool(await client.call_tool("threaded", {}))
        schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
        seen["plain_output_schema"] = schemas["plain"]
        seen["plain"] = (await client.call_tool("plain", {})).structured_content
        seen["rate_output_properties"] = sorted(schemas["rate"]["properties"])
    # A server that asks the client back needs a session to ask it on: mcp 1.x's kind.
    callbacks = {"elicitation_callback": on_elicit, "sampling_callback": on_sample}
    async with Client(mcp, mode="legacy", **callbacks) as legacy:
        seen["ask"] = text(await legacy.call_tool("ask", {}))
        seen["sample"] = text(await legacy.call_tool("sample", {}))
    seen["streamable_http_app"] = type(mcp.streamable_http_app()).__name__
    stdio = StdioServerParameters(command=sys.executable, args=[__file__, "--stdio"])
    async with Client(stdio) as over_stdio:  # mcp.run(), its default transport
        seen["run"] = text(await over_stdio.call_tool("read_note", {"note_id": "1"}))
    try:
        import mcp.server.fastmcp
    except ModuleNotFoundError as exc:
        seen["fastmcp_module"] = "FastMCP was renamed to MCPServer" in str(exc)

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            return AccessToken(token=token, client_id="cli", scopes=["read"])

    verifier: TokenVerifier = Verifier()
    settings = AuthSettings(
        resource_server_url="https://mcp.example.com/mcp",
        issuer_url="https://auth.example.com",
        required_scopes=["read"],
    )
    guarded = type(sdk_server())("guarded", auth=settings, token_verifier=verifier)
    seen["auth"] = {
        "required_scopes": settings.required_scopes,
        "verified": (await verifier.verify_token("t")).client_id,  # type: ignore[union-attr]
        "server": type(guarded).__name__,
    }
    return seen


def rated_bool(result: Any) -> Any:
    return result.structured_content["result"]


async def with_fastmcp() -> dict[str, Any]:
    from fastmcp import Client

    mcp = fastmcp_server()
    progress: list[Any] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append([done, total])

    seen: dict[str, Any] = {}
    async with Client(mcp, progress_handler=on_progress) as client:
        rated = await client.call_tool("rate", RATE)
        seen["rate"] = rated.structured_content
        seen["progress"] = progress
        seen["read_note"] = text(await client.call_tool("read_note", {"note_id": "1"}))
        seen["threaded"] = rated_bool(await client.call_tool("threaded", {}))
    seen["http_app"] = callable(mcp.http_app())
    return seen


async def main() -> dict[str, Any]:
    return {"sdk": await with_sdk(), "fastmcp": await with_fastmcp()}


if __name__ == "__main__":
    if sys.argv[1:] == ["--stdio"]:
        sdk_server().run()
    else:
        print(json.dumps(asyncio.run(main())))
