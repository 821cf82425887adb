"""The server ``bench/soak.py`` soaks: task-optional tools that complete, fail, park and sleep.

Run by soak.py as ``python -m hypercorn --worker-class trio --bind 127.0.0.1:PORT
bench.soak_app:app`` from the repository root. One Tasks extension with a short TTL
(``SOAK_TTL_MS``, default 4 s) so parked tasks that nobody answers expire during the soak;
every other case finishes well before it. Expired records are reaped every
``SOAK_REAP_SECONDS`` (default 1 s). The plain tools ``stats`` (runner, store and bus counts)
and ``objects`` (live objects by type, trio tasks by name) let the soak see the run from
outside.
"""

from __future__ import annotations

import gc
import os
from collections import Counter

import trio

from presa_trio import Context, InternalError, Server
from presa_trio.ext.tasks import TaskLimits, TasksExtension
from presa_trio.mrtr import elicit

TTL_MS = int(os.environ.get("SOAK_TTL_MS", "4000"))
REAP_SECONDS = float(os.environ.get("SOAK_REAP_SECONDS", "1.0"))
OPTIONAL = {"tasks": "optional"}

server = Server("soak", "1")
tasks_extension = TasksExtension(
    ttl_ms=TTL_MS,
    poll_interval_ms=50,
    limits=TaskLimits(max_tasks=None, max_stored_per_principal=None, max_active_per_principal=None),
    # Reap expired records every second (default: a minute), so the store's count shows
    # whether every record goes away once its TTL is over.
    reap_interval=REAP_SECONDS,
)
server.add_extension(tasks_extension)


@server.tool(options=OPTIONAL)
async def complete(ms: int) -> str:
    """Sleeps ``ms`` milliseconds, then completes."""
    await trio.sleep(ms / 1000)
    return f"done {ms}"


@server.tool(options=OPTIONAL)
async def fail(ms: int) -> str:
    """Sleeps ``ms`` milliseconds, then fails (the task ends ``failed``)."""
    await trio.sleep(ms / 1000)
    raise InternalError("soak failure")


@server.tool(options=OPTIONAL)
async def park(ctx: Context, key: str) -> str:
    """Parks on one elicitation under ``key``; returns the answer's ``v``."""
    answers = await ctx.input({key: elicit("?", {"v": {"type": "string"}})})
    return str(answers[key]["content"]["v"])


@server.tool(options=OPTIONAL)
async def sleep_forever() -> str:
    """Never returns on its own (for ``tasks/cancel``)."""
    await trio.sleep_forever()
    return "unreachable"


@server.tool()
async def stats(ctx: Context) -> dict[str, int]:
    """This run's task runner, task store and subscription bus, as counts."""
    run = ctx.service(tasks_extension)
    return {
        "live": run.runner.live_count,
        "parked": run.runner.parked_count(),
        "stored": await run.store.count(),
        "listeners": ctx.runtime.bus.listener_count,
    }


@server.tool(thread=False)
def objects() -> dict[str, int]:
    """Live Python objects in the worker by type name (after a full collection), plus the
    number of trio tasks: what a leak would leave behind, unlike RSS."""
    gc.collect()
    counts = Counter(type(o).__name__ for o in gc.get_objects())
    names: Counter[str] = Counter()
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        if task is None:
            continue
        names[f"(task) {task.name}"] += 1
        stack.extend(t for n in task.child_nurseries for t in n.child_tasks)
    # trio drops the deadline-heap entry of a finished cancel scope lazily (when its deadline
    # passes, or at a prune past 1,000 stale entries): such entries keep their scopes alive.
    runner = getattr(trio._core._run.GLOBAL_RUN_CONTEXT, "runner", None)
    heap = len(runner.deadlines._heap) if runner is not None else -1
    return {
        "(gc objects)": sum(counts.values()),
        "(trio tasks)": sum(names.values()),
        "(trio deadline heap)": heap,
        **counts,
        **names,
    }


# PRESA_STORE names the backend (soak.py --store): memory: by default
app = server.asgi_app(backend=os.environ.get("PRESA_STORE") or None)
