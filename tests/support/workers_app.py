"""The server the multi-worker tests run under ``hypercorn --workers 3``.

Its backend is ``$PRESA_STORE`` (a SQLite file shared by the workers). Tools record what
happened in files under ``$WORKERS_DIR``, so a test can see which worker ran a task and when
its cleanup finished, whatever worker answered the request.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import trio

from presa_trio import Context, Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.mrtr import elicit

server = Server("workers", "1.0", backend=os.environ["PRESA_STORE"])
server.add_extension(TasksExtension(poll_interval_ms=50, reap_interval=0.5))
RECORDS = Path(os.environ["WORKERS_DIR"])
QUESTION = elicit("Go?", {"go": {"type": "boolean"}}, ["go"])


def note(name: str, text: str) -> None:
    (RECORDS / name).write_text(text)


@server.tool()
def whoami() -> dict[str, int]:
    """The pid of the worker that answered."""
    return {"pid": os.getpid()}


@server.tool(options={"tasks": "optional"})
async def sleeper(tag: str) -> str:
    """Sleeps a minute; records its worker at start and when its cleanup ends."""
    note(f"{tag}.pid", str(os.getpid()))
    try:
        await trio.sleep(60)
    finally:
        with trio.CancelScope(shield=True):
            await trio.sleep(0.3)
            note(f"{tag}.cleaned", repr(time.time()))
    return "woke"


@server.tool(options={"tasks": "optional"})
async def asker(ctx: Context, tag: str) -> str:
    """Records its worker, then asks one question (parks, as a task)."""
    note(f"{tag}.pid", str(os.getpid()))
    answer = await ctx.input({"go": QUESTION})
    return f"go={answer['go']['content']['go']} on {os.getpid()}"


@server.tool()
async def question(ctx: Context) -> str:
    """Asks one question by MRTR rounds (never a task)."""
    answer = await ctx.input({"go": QUESTION})
    return f"go={answer['go']['content']['go']}"


@server.tool()
def announce(ctx: Context) -> int:
    """Announce a tool-list change from this worker."""
    return ctx.runtime.notify_tools_changed()


app = server.asgi_app()
