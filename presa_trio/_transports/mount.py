"""This app beside a host ASGI app that has no lifespan hook to lend (Quart-Trio, a bare
ASGI router): one ASGI app that sends a path prefix to the MCP app and everything else to the
host, and runs the MCP server's lifespan around the host's.

The lifespan order is the one a host expects of a component it owns: the server runs before
the host starts (so a host startup hook may already call it) and drains after the host has
stopped (so a host shutdown hook may still call it); hypercorn hears ``shutdown.complete``
only when both are done.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, final

import trio

from ._asgi_types import Asgi, Message, Receive, Scope, Send
from ._shutdown import ShutdownBound

logger = logging.getLogger("presa_trio")


class MountedApp(Protocol):
    """What ``Mounted`` needs of the MCP app (an ``AsgiApp``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    def lifespan(self) -> AbstractAsyncContextManager[Any]: ...

    def begin_shutdown(self) -> None: ...

    @property
    def shutdown_bound(self) -> ShutdownBound: ...


@final
class Mounted:
    """``prefix`` (and everything below it) goes to ``mcp``; every other request to ``host``.

    Build it with ``AsgiApp.mounted``. The MCP app sees the prefix as its ``root_path``, as
    under Starlette's ``Mount``, so it serves ``{prefix}/mcp``.
    """

    def __init__(self, mcp: MountedApp, host: Asgi, prefix: str) -> None:
        if not prefix.startswith("/") or prefix.endswith("/"):
            raise ValueError(f"a mount prefix is '/name' (no trailing slash), not {prefix!r}")
        self.mcp = mcp
        self.host = host
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
        elif scope["type"] == "http" and self._ours(scope):
            root = scope.get("root_path", "") + self.prefix
            await self.mcp({**scope, "root_path": root}, receive, send)
        else:
            await self.host(scope, receive, send)

    def _ours(self, scope: Scope) -> bool:
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        return path == self.prefix or path.startswith(self.prefix + "/")

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "lifespan.startup":
            return
        try:
            await self._run(_HostLifespan(self.host, scope, receive, send))
        finally:
            self.mcp.shutdown_bound.cancel()  # the shutdown (if one began) is over

    async def _run(self, host: _HostLifespan) -> None:
        try:
            async with self.mcp.lifespan():
                if not await host.run(self.mcp.begin_shutdown):
                    return  # the host's startup failed, and it has said so
        except Exception as exc:
            if host.state == "starting":
                logger.error("the MCP server did not start", exc_info=exc)
                message = f"presa_trio: {exc!r}"
                await host.send({"type": "lifespan.startup.failed", "message": message})
                return
            # After startup a failed run is logged; requests are answered 503 from now on.
            logger.error("the MCP server's run failed after startup", exc_info=exc)
            if host.state == "serving":  # the ASGI server still expects its shutdown turn
                await host.until_shutdown()
        await host.send({"type": "lifespan.shutdown.complete"})


@final
class _HostLifespan:
    """The host's lifespan, driven from ours: its startup and shutdown events are forwarded
    and its answers read back; a host without lifespan support simply has none."""

    def __init__(self, host: Asgi, scope: Scope, receive: Receive, send: Send) -> None:
        self.host = host
        self.scope = scope
        self.receive = receive
        self.send = send
        self.state = "starting"
        self.to_host, self.host_reads = trio.open_memory_channel[Message](math.inf)
        self.host_says, self.from_host = trio.open_memory_channel[Message](math.inf)

    async def run(self, begin_shutdown: Callable[[], None]) -> bool:
        """Start the host, report startup, wait for shutdown, stop the host. Returns once the
        host has stopped (the caller reports ``shutdown.complete`` when the server is down),
        or False at once when the host's startup failed."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._host)
            self.to_host.send_nowait({"type": "lifespan.startup"})
            answer = await self.from_host.receive()
            if answer["type"] == "lifespan.startup.failed":
                self.state = "failed"
                await self.send(dict(answer))
                nursery.cancel_scope.cancel()
                return False
            await self.send({"type": "lifespan.startup.complete"})
            self.state = "serving"
            await self.until_shutdown()
            begin_shutdown()
            self.to_host.send_nowait({"type": "lifespan.shutdown"})
            answer = await self.from_host.receive()
            if answer["type"] == "lifespan.shutdown.failed":
                logger.error("the host app's shutdown failed: %s", answer.get("message", ""))
            nursery.cancel_scope.cancel()
        return True

    async def until_shutdown(self) -> None:
        while (await self.receive())["type"] != "lifespan.shutdown":
            pass
        self.state = "stopping"

    async def _host(self) -> None:
        """The host app's own lifespan call; an app that refuses the lifespan scope (raises, or
        returns without answering) is treated as one with nothing to start or stop."""
        try:
            await self.host(self.scope, self.host_reads.receive, self._answer)
        except Exception as exc:
            logger.debug("the host app has no lifespan: %r", exc)
        # Whatever the host left unanswered is answered for it, so ours never waits on it.
        await self.host_says.send({"type": "lifespan.startup.complete"})
        await self.host_says.send({"type": "lifespan.shutdown.complete"})

    async def _answer(self, message: Message) -> None:
        await self.host_says.send(message)
