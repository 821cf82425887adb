"""The server ``bench/tasks_concurrency.py`` loads: one task-optional tool that returns at once.

Run by that bench as ``python -m hypercorn --worker-class trio --workers 2 --bind
127.0.0.1:PORT bench.tasks_app:app`` from the repository root, on the store ``PRESA_STORE``
names (memory: by default). Two plain tools let the bench see each worker from outside:
``whoami`` (the worker's pid) and ``tally`` (the worker's database counts since its first
``tally``; the memory backend has none). Neither touches the store.
"""

from __future__ import annotations

import os

import trio

from presa_trio import Context, Server
from presa_trio._backends.tally import Tally
from presa_trio.ext.tasks import TaskLimits, TasksExtension

POLL_MS = int(os.environ.get("TASKS_BENCH_POLL_MS", "10"))

server = Server("tasks-concurrency", "1", loop_warning=None)
server.add_extension(
    TasksExtension(
        poll_interval_ms=POLL_MS,
        # No limits: the bench measures the store's speed, not its quotas (one principal,
        # the anonymous one, makes every task).
        limits=TaskLimits(
            max_tasks=None,
            max_stored_per_principal=None,
            max_active_per_principal=None,
            max_stored_bytes=None,
        ),
    )
)


@server.tool(options={"tasks": "optional"})
async def quick() -> str:
    """Returns at once (one checkpoint, as any async tool makes)."""
    await trio.lowlevel.checkpoint()
    return "done"


@server.tool(thread=False)
def whoami() -> int:
    """This worker's process id."""
    return os.getpid()


@server.tool()
async def tally(ctx: Context) -> dict[str, int]:
    """This worker's database counts (``presa_trio._backends.tally``), counting from the
    first call on: its pid, and calls, writes, statements and looks; only the pid on the
    memory backend."""
    await trio.lowlevel.checkpoint()
    db = getattr(ctx.runtime.backend, "db", None)
    if db is None:
        return {"pid": os.getpid()}
    if db.tally is None:
        db.tally = Tally()
    return {"pid": os.getpid(), **db.tally.counts()}


app = server.asgi_app(backend=os.environ.get("PRESA_STORE") or None)
