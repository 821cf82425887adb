"""The server the client CLI's tests (tests/cli/test_client_*.py) call: in process as
``cli_client_app:server``, under hypercorn as ``cli_client_app:app``, and over stdio.

Tools: ``add`` (typed arguments), ``count_up`` (progress), ``describe`` (every JSON type,
echoed back as structured content), ``region_weather`` (an argument mirrored into
``Mcp-Param-Region``), ``fail`` (an error result), ``ask`` (a question by MRTR), ``ask_task``
(a task that asks a question) and ``slow_task`` (a task that runs until cancelled). A
resource and a prompt.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import trio

from presa_trio import Context, Param, Server, ToolError
from presa_trio.ext.tasks import TasksExtension
from presa_trio.mrtr import elicit

server = Server("cli-client-e2e", "1.0")
server.add_extension(TasksExtension())

ASK_NAME = {"name": elicit("Your name?", {"name": {"type": "string"}}, ["name"])}


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers.

    The sum, as text."""
    return str(a + b)


class Described(TypedDict):
    count: int
    ratio: float
    loud: bool
    tags: list[str]
    extra: dict[str, Any]
    label: str
    missing: int | None


@server.tool()
def describe(
    count: int,
    ratio: float,
    loud: bool,
    tags: list[str],
    extra: dict[str, Any],
    label: str = "none",
    missing: int | None = None,
) -> Described:
    """Echo every argument with its JSON type (as structured content)."""
    return Described(
        count=count, ratio=ratio, loud=loud, tags=tags, extra=extra, label=label, missing=missing
    )


@server.tool()
def region_weather(region: Annotated[str, Param(header="Region")]) -> str:
    """Weather for a region named in a routing header."""
    return f"weather in {region}"


@server.tool()
async def count_up(ctx: Context, to: int) -> str:
    """Count, reporting progress on the way."""
    for step in range(1, to + 1):
        await ctx.progress(step, to, f"step {step}")
    return f"counted to {to}"


@server.tool()
def fail() -> str:
    """Always fails (an error result)."""
    raise ToolError("it failed on purpose")


@server.tool()
async def ask(ctx: Context) -> str:
    """Ask the caller's name (by MRTR)."""
    answers = await ctx.input(ASK_NAME)
    answer = answers["name"]
    if answer.get("action") != "accept":
        return f"no name ({answer.get('action')})"
    return "Hello, " + answer["content"]["name"]


@server.tool(options={"tasks": "required"})
async def ask_task(ctx: Context, greeting: str = "Hello") -> str:
    """A task that asks the caller's name."""
    await trio.sleep(0.05)
    answers = await ctx.input(ASK_NAME)
    return f"{greeting}, {answers['name']['content']['name']}"


@server.tool(options={"tasks": "required"})
async def slow_task() -> str:
    """A task that runs until cancelled."""
    await trio.sleep(3600)
    return "never"


@server.resource("notes://greeting", mime_type="text/plain", description="A fixed note.")
def greeting() -> str:
    return "hello, reader"


@server.prompt()
def summarize(topic: str, words: str = "50") -> str:
    """Summarize a topic."""
    return f"Summarize {topic} in {words} words."


app = server.asgi_app()
