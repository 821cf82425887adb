"""A tool that runs as a task and asks a question on the way: the guide to ``presa-trio
call`` (docs/guides/cli-client.md) follows it from the shell and answers it."""

from __future__ import annotations

from presa_trio import Context, Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.mrtr import elicit

server = Server("interview", version="1.0.0")
server.add_extension(TasksExtension())


@server.tool(options={"tasks": "required"})
async def greet(ctx: Context, greeting: str = "Hello") -> str:
    """Asks your name, as a task, then greets you."""
    question = elicit("Your name?", {"name": {"type": "string"}}, ["name"])
    answer = (await ctx.input({"name": question}))["name"]
    if answer.get("action") != "accept":
        return "No name, no greeting."
    return f"{greeting}, {answer['content']['name']}!"
