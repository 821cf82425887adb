"""The MCP app inside a host ASGI app. ``Mounted``, for a host that has no lifespan hook to
lend (Quart-Trio, a bare ASGI router): one ASGI app that sends a path prefix to the MCP app and
everything else to the host, and runs the MCP server's lifespan around the host's.
``MetadataApp``, for a host that routes itself (Starlette): the MCP app's Protected Resource
Metadata at the host's root, outside the prefix, where its 401 challenge points (RFC 9728 §3.1).

The lifespan order is the one a host expects of a component it owns: the server runs before
the host starts (so a host startup hook may already call it) and drains after the host has
stopped (so a host shutdown hook may still call it); hypercorn hears ``shutdown.complete``
only when both are done. Neither class reads a request: the MCP app answers it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, final

import trio

from .._process.shutdown import ShutdownBound
from ._asgi_types import Asgi, Message, Receive, Scope, Send

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
    under Starlette's ``Mount``, so it serves ``{prefix}/mcp``. ``metadata_path`` (an app
    with auth: its ``BearerAuth.metadata_path``) goes to ``mcp`` too, outside the prefix:
    there the MCP app answers its Protected Resource Metadata, where its challenge points.
    An MCP app given a ``shutdown_timeout`` (process policy, off by default) starts that
    clock when the ASGI server says shutdown, so it bounds the host's own shutdown too.
    """

    def __init__(
        self, mcp: MountedApp, host: Asgi, prefix: str, metadata_path: str | None = None
    ) -> None:
        if not prefix.startswith("/") or prefix.endswith("/"):
            raise ValueError(f"a mount prefix is '/name' (no trailing slash), not {prefix!r}")
        self.mcp = mcp
        self.host = host
        self.prefix = prefix
        self.metadata_path = metadata_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
        elif scope["type"] != "http":
            await self.host(scope, receive, send)
        elif (path := _below_root(scope)) == self.prefix or path.startswith(self.prefix + "/"):
            root = scope.get("root_path", "") + self.prefix
            await self.mcp({**scope, "root_path": root}, receive, send)
        elif path == self.metadata_path:  # at the host's root, as one of the MCP app's paths
            await self.mcp(scope, receive, send)
        else:
            await self.host(scope, receive, send)

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
class MetadataApp:
    """An MCP app's Protected Resource Metadata at the root of its host; build it with
    ``AsgiApp.metadata_app()`` and route ``path`` to it.

    Mounted under ``/api``, the MCP app sees only paths below ``/api``, but its challenge
    names ``https://host/.well-known/oauth-protected-resource/api/mcp`` (RFC 9728 §3.1: the
    well-known path at the host's root, the resource's path after it). This answers that one
    path by handing it to the MCP app, so the answer is the MCP app's own (the document, the
    Host and Origin checks, CORS, 405 for anything but GET); any other path is 404. It serves
    nothing else, and has no lifespan.
    """

    def __init__(self, mcp: Asgi, path: str) -> None:
        self.mcp = mcp
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # a lifespan, a websocket: nothing to do
            await trio.lowlevel.checkpoint()
        elif self.path in (scope["path"], scope.get("root_path", "") + scope["path"]):
            # Routed here by the host (a Starlette ``Route``, or a router that strips the path
            # it matched): the MCP app gets it as a path of its own, one of its metadata paths.
            await self.mcp({**scope, "path": self.path, "root_path": ""}, receive, send)
        else:
            headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"9")]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": b"Not Found"})


def _below_root(scope: Scope) -> str:
    """The request's path below the ``root_path`` the host was given (its whole path when the
    host runs at the root of the server)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :]
    return path


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
