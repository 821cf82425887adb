"""A server for the older era's session tests: tools that ask the client, run until
cancelled, announce changes and tell which process ran them. Served by hypercorn (``app``,
its store from PRESA_STORE) and built in process (``build``)."""

from __future__ import annotations

import os
from typing import Any

import trio

from presa_trio import Context, Server, Sessions, Validation
from presa_trio.mrtr import elicit, list_roots, sample

NAME = elicit("What is your name?", {"name": {"type": "string"}}, ["name"])


def build(**options: Any) -> Server:
    server = Server(
        "sessions",
        "1",
        logging=True,
        validation=Validation(outbound=True),
        loop_warning=None,
        **options,
    )

    @server.tool()
    def whoami() -> int:
        """The process that ran this call."""
        return os.getpid()

    @server.tool()
    async def greet(ctx: Context) -> str:
        """Asks for a name by elicitation, then greets it; says where it ran."""
        answer = (await ctx.input({"name": NAME}, state={"asked": "name"}))["name"]
        name = (answer.get("content") or {}).get("name", "stranger")
        return f"Hello, {name}! state={dict(ctx.state or {})} pid={os.getpid()}"

    @server.tool()
    async def ask_model(ctx: Context, prompt: str) -> str:
        """Asks the client's model."""
        answer = (await ctx.input({"reply": sample(prompt, 50)}))["reply"]
        content = answer.get("content") or {}
        return f"model said {content.get('text')}"

    @server.tool()
    async def roots(ctx: Context) -> int:
        """How many roots the client has."""
        answer = (await ctx.input({"roots": list_roots()}))["roots"]
        return len(answer.get("roots", []))

    @server.tool()
    async def sleeper(ctx: Context) -> str:
        """Runs until cancelled (an hour at most), reporting progress once started."""
        await ctx.progress(1, message=f"sleeping in {os.getpid()}")
        await trio.sleep(3600)
        return "woke"

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Logs once at each of debug, info and error."""
        for level in ("debug", "info", "error"):
            await ctx.log(level, f"a {level} line")
        return "said"

    @server.tool()
    async def relay(ctx: Context) -> str:
        """Logs four messages, the second marked where a test's proxy cuts the stream,
        pausing after it so that the client reconnects while the call still runs (whether
        it does changes nothing of what the client must get); says where it ran."""
        await ctx.log("info", "m1")
        await ctx.log("info", "m2 cut-here")
        await trio.sleep(0.5)
        await ctx.log("info", "m3")
        await ctx.log("info", "m4")
        return f"relayed pid={os.getpid()}"

    @server.tool()
    def touch(ctx: Context, uri: str) -> int:
        """Announces that ``uri`` changed, and that the tool list did; its process."""
        ctx.runtime.notify_resource_updated(uri)
        ctx.runtime.notify_tools_changed()
        return os.getpid()

    @server.resource("test://watched", name="watched", mime_type="text/plain")
    def watched() -> str:
        return "watched content"

    return server


server = build(
    backend=os.environ.get("PRESA_STORE") or None,
    sessions=Sessions(push_timeout=float(os.environ.get("PUSH_TIMEOUT", "300"))),
)
app = server.asgi_app()
