"""Servers whose user code fails where error boundaries must hold, for the end-to-end tests.

``app`` (``server``) runs the Tasks extension on ``DoomedStore``, a store that cannot record
anything about a task of the ``doomed`` tool, and serves ``messy``, a task whose cleanup
raises when it is cancelled. ``fragile_app`` (``fragile_server``) runs an extension whose
service crashes shortly after startup. A few counters let a test observe the process from
outside, and ``LifespanProbe`` prints every lifespan message the app sends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import trio

from presa_trio import Server, Validation
from presa_trio.ext.tasks import MemoryTaskStore, TaskLimits, TaskRecord, TasksExtension
from presa_trio.extensions import Extension, ExtensionContext

DOOMED = "doomed"
CLEANUP_ERROR = "cleanup of messy failed"
STORE_ERROR = "the task store cannot record"
SERVICE_ERROR = "the fragile service broke"

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
Receive = Callable[[], Awaitable[Message]]
AsgiApp = Callable[[Message, Receive, Send], Awaitable[None]]

seen = {
    "messy_started": 0,
    "cleanup_raised": 0,
    "doomed_started": 0,
    "doomed_finished": 0,
    "store_refusals": 0,
}


class DoomedStore:
    """A ``TaskStore``: ``MemoryTaskStore``, except that every change to a ``doomed`` task's
    record fails with ``OSError`` (a disk or a database gone at the wrong moment)."""

    def __init__(self) -> None:
        self._inner = MemoryTaskStore()

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        await self._inner.create(task, limits)

    async def get(self, task_id: str) -> TaskRecord | None:
        return await self._inner.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        if task.tool == DOOMED:
            await trio.lowlevel.checkpoint()
            seen["store_refusals"] += 1
            raise OSError(f"{STORE_ERROR} task {task.task_id}")
        return await self._inner.compare_and_set(task, expected_revision)

    async def delete_expired(self, now_ms: int) -> int:
        return await self._inner.delete_expired(now_ms)

    async def count(self) -> int:
        return await self._inner.count()


class LifespanProbe:
    """ASGI middleware printing each lifespan message the app sends (``lifespan sent TYPE``).

    hypercorn's trio worker (0.18) neither logs nor exits non-zero when an app answers
    ``lifespan.shutdown.failed``: the failure is lost in its cancelled lifespan nursery. So
    the tests read what the app said from this line instead.
    """

    def __init__(self, app: AsgiApp) -> None:
        self.app = app

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def reporting(message: Message) -> None:
            print(f"lifespan sent {message['type']}: {message.get('message', '')}", flush=True)
            await send(message)

        try:
            await self.app(scope, receive, reporting)
        except BaseException as exc:
            print(f"lifespan app raised {exc!r}", flush=True)
            raise
        print("lifespan app returned", flush=True)


server = Server("boundaries", "1.0", validation=Validation(outbound=True))
server.add_extension(TasksExtension(store=DoomedStore(), ttl_ms=600_000, poll_interval_ms=50))


@server.tool()
def stats() -> dict[str, int]:
    """What the tools and the store saw so far."""
    return dict(seen)


@server.tool()
def echo(text: str) -> str:
    """A plain synchronous tool call."""
    return text


@server.tool(options={"tasks": "optional"})
async def nap(seconds: float = 0.3) -> str:
    """Sleeps a little, then answers."""
    await trio.sleep(seconds)
    return f"rested {seconds}"


@server.tool(options={"tasks": "optional"})
async def messy() -> str:
    """Sleeps forever beside a child whose cleanup raises ``OSError``."""

    async def child(task_status: trio.TaskStatus[None]) -> None:
        try:
            task_status.started()
            await trio.sleep_forever()
        finally:
            seen["cleanup_raised"] += 1
            raise OSError(CLEANUP_ERROR)

    async with trio.open_nursery() as nursery:
        await nursery.start(child)
        seen["messy_started"] += 1
        await trio.sleep_forever()
    return "unreachable"


@server.tool(DOOMED, options={"tasks": "optional"})
async def doomed() -> str:
    """Works fine; it is its store that fails to record the outcome."""
    seen["doomed_started"] += 1
    await trio.sleep(0.1)
    seen["doomed_finished"] += 1
    return "never recorded"


app = LifespanProbe(server.asgi_app())


class FragileExtension(Extension):
    """An extension whose service starts fine, then crashes."""

    id = "com.example/fragile"

    async def serve(self, context: ExtensionContext, *, task_status: trio.TaskStatus[Any]) -> None:
        task_status.started()
        await trio.sleep(0.2)
        raise RuntimeError(SERVICE_ERROR)


fragile_server = Server("fragile", "1.0", validation=Validation(outbound=True))
fragile_server.add_extension(FragileExtension())


@fragile_server.tool()
def ping() -> str:
    """Answers while the extension's service is gone."""
    return "pong"


fragile_app = LifespanProbe(fragile_server.asgi_app())
