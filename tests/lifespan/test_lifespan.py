"""The ASGI lifespan runs the server (one runtime per lifespan) and reports startup failure."""

from __future__ import annotations

from typing import Any

import trio

from presa_trio import Server
from presa_trio.extensions import Extension, ExtensionContext


async def run_lifespan(server: Server, shutdown: bool = True) -> list[dict[str, Any]]:
    app = server.asgi_app()
    to_app, app_inbox = trio.open_memory_channel[dict[str, Any]](10)
    sent: list[dict[str, Any]] = []
    started = trio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))
        if message["type"].startswith("lifespan.startup"):
            started.set()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                app, {"type": "lifespan", "asgi": {"version": "3.0"}}, app_inbox.receive, send
            )
            await to_app.send({"type": "lifespan.startup"})
            await started.wait()
            if sent[-1]["type"] == "lifespan.startup.complete":
                assert app.runtime is not None
                await to_app.send({"type": "lifespan.shutdown"})
    assert app.runtime is None
    return sent


async def test_startup_and_shutdown() -> None:
    server = Server("life")
    sent = await run_lifespan(server)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


class Broken(Extension):
    id = "dev.example/broken"

    async def serve(self, context: ExtensionContext, *, task_status: trio.TaskStatus[None]) -> None:
        raise OSError("cannot reach the task database")


async def test_startup_failure_is_reported() -> None:
    server = Server("life")
    server.add_extension(Broken())
    sent = await run_lifespan(server)
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]
    assert "cannot reach the task database" in sent[0]["message"]
