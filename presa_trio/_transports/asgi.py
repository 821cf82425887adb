"""Streamable HTTP (wire §13) as an ASGI 3 app, for ``hypercorn --worker-class trio``.

The edge only moves bytes: admission of Host/Origin, POST-only, the bearer token (when the
app has ``auth``; ``presa_trio.auth`` decides), a body limit, parsing, and a ``Responder``
that answers JSON or, once a notification is sent, SSE. Every JSON-RPC error it
decides is handed to the dispatcher (``refuse``), which shapes it like every other error. The
lifespan runs the server (``open_runtime``); a client disconnect cancels its request.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import final

import trio

from .._boundary import partition, single
from .._kernel.dispatcher import Dispatcher
from .._kernel.runtime import Runtime
from .._kernel.tracing import http_attributes
from .._process.shutdown import ShutdownBound
from .._protocol import cors, sse
from .._protocol.admission import HostPolicy, refuse_any
from .._protocol.headers import RoutingHeaders
from .._protocol.jsonrpc import EnvelopeError, Notification, parse_message
from ..auth._bearer import Authorization, BearerAuth
from ..errors import Forbidden, McpError, RequestTimeout, RequestTooLarge
from ._asgi_types import Asgi, Message, Receive, Scope, Send
from ._deadlines import Deadlines
from ._first_wait import await_noticing_wait
from .mount import MetadataApp, Mounted

OpenRuntime = Callable[[], AbstractAsyncContextManager[Runtime]]

logger = logging.getLogger("presa_trio.http")

_JSON = [(b"content-type", b"application/json")]
_PLAIN = [(b"content-type", b"text/plain; charset=utf-8")]
_NO_TOKEN = Authorization()  # an app that verifies no tokens (frozen: one for all requests)
_TRIOS = Deadlines()  # never kept: trio's own deadlines, for a responder given none
DEFAULT_MAX_BODY = 4 * 1024 * 1024
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_WRITE_TIMEOUT = 30.0
DEFAULT_SHUTDOWN_TIMEOUT = 10.0


@final
class AsgiApp:
    """The MCP endpoint of one server; make it with ``server.asgi_app(...)``.

    ``path`` is the endpoint (``/mcp``); ``max_body`` caps a request body in bytes (413
    beyond it, read no further); ``host_policy`` guards against DNS rebinding (loopback
    names only by default). ``body_timeout`` bounds the time a request body may take to
    arrive (408 after it); ``write_timeout`` bounds each write to a client that has stopped
    reading (its request is then dropped like a disconnected one). The ASGI lifespan runs the
    server; a host application that does not forward its lifespan to this app enters
    ``app.lifespan()`` itself. Once the lifespan is told to shut down (or ``begin_shutdown``
    is called), the process is gone within ``shutdown_timeout`` seconds, whatever still runs
    (``None``: no bound). With ``auth`` (a ``presa_trio.auth.BearerAuth``) every request
    needs a valid bearer token, checked before its body is read, and the app also answers
    ``GET`` for its Protected Resource Metadata at ``/.well-known/oauth-protected-resource``
    (bare, and followed by the endpoint's path or the ``resource``'s); mounted under a prefix,
    the host serves it at its root with ``metadata_app()`` (``mounted`` does that itself).
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        open_runtime: OpenRuntime,
        *,
        path: str = "/mcp",
        max_body: int = DEFAULT_MAX_BODY,
        host_policy: HostPolicy | None = None,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        shutdown_timeout: float | None = DEFAULT_SHUTDOWN_TIMEOUT,
        cors: bool = False,
        auth: BearerAuth | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.cors = cors
        self.auth = auth
        self._open_runtime = open_runtime
        self._runtime: Runtime | None = None
        self._watchers: trio.Nursery | None = None
        self.path = path
        self.max_body = max_body
        self.host_policy = host_policy if host_policy is not None else HostPolicy()
        self.body_timeout = body_timeout
        self.write_timeout = write_timeout
        self._deadlines = Deadlines(body_timeout, write_timeout)
        self.shutdown_bound = ShutdownBound(shutdown_timeout)
        self._metadata_paths = auth.metadata_paths(path) if auth is not None else frozenset()

    @property
    def runtime(self) -> Runtime | None:
        """The run this app serves requests with, while its lifespan is on."""
        return self._runtime

    @asynccontextmanager
    async def lifespan(self, host_app: object = None) -> AsyncIterator[Runtime]:
        """Run the server for as long as the block; requests are served by this run.

        Before it is entered, and after it exits, requests are answered 503 (retryable).
        A host framework's ``lifespan=`` hook takes ``host_lifespan``.
        """
        if self._runtime is not None:
            raise RuntimeError("this app is already running")
        # The run also owns the disconnect watchers of the requests it serves: a watcher
        # outlives its request by a scheduler pass at most (see ``_serve``), and starting it
        # here rather than in a nursery per request halves what watching costs a request.
        # Its keeper of the requests' deadlines is one more.
        async with self._open_runtime() as runtime, trio.open_nursery() as watchers:
            await watchers.start(self._deadlines.keep)
            self._runtime, self._watchers = runtime, watchers
            try:
                yield runtime
            finally:
                self._runtime = self._watchers = None
                watchers.cancel_scope.cancel()

    @asynccontextmanager
    async def host_lifespan(self, host_app: object = None) -> AsyncIterator[None]:
        """``lifespan`` shaped for a host app's ``lifespan=`` hook (Starlette's, say), which
        passes the host app and wants no state back: ``lifespan=mcp_app.host_lifespan``."""
        async with self.lifespan():
            yield None

    def mounted(self, host: Asgi, at: str) -> Mounted:
        """This app under the path prefix ``at`` of ``host``, as one ASGI app that also runs
        this server's lifespan around the host's: for a host with no ``lifespan=`` hook of its
        own to lend (Quart-Trio: ``app.asgi_app = mcp_app.mounted(app.asgi_app, at="/deploy")``).
        With ``auth`` it also answers the metadata path at the host's root (see
        ``metadata_app``), ahead of the host.
        """
        return Mounted(self, host, at, self.auth.metadata_path if self.auth else None)

    def metadata_app(self) -> MetadataApp:
        """This app's Protected Resource Metadata for the root of a host that mounts it under
        a prefix: an ASGI app to route at its ``path``, where the 401 challenge points
        (Starlette: ``Route(metadata.path, metadata)`` beside ``Mount("/api", app=mcp_app)``).
        The ``resource`` must include the prefix (``https://host/api/mcp``). It answers as
        this app does (one document, Host check, CORS). Only for an app with ``auth``.
        """
        if self.auth is None:
            raise RuntimeError("metadata_app() is for an app with auth=BearerAuth(...)")
        return MetadataApp(self, self.auth.metadata_path)

    def open_runtime(self) -> AbstractAsyncContextManager[Runtime]:
        """Run the server for this app (as ``lifespan()`` does), e.g. to serve it on stdio."""
        return self.lifespan()

    def begin_draining(self) -> None:
        """Start shutting down now: listen streams end with their final result and no new
        tasks are admitted, while requests in flight finish (see ``Runtime.begin_draining``)."""
        if self._runtime is not None:
            self._runtime.begin_draining()

    def begin_shutdown(self) -> None:
        """The process is stopping: drain, and start the ``shutdown_timeout`` clock."""
        self.shutdown_bound.start()
        self.begin_draining()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        else:  # websocket and the like: not ours (wire §13.7)
            await trio.lowlevel.checkpoint()

    # ------------------------------------------------------------------ lifespan

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        started = stopping = False
        try:
            async with self.lifespan():
                await send({"type": "lifespan.startup.complete"})
                started = True
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
                stopping = True
                self.begin_shutdown()
        except BaseException as exc:
            others, errors = partition(exc)
            if others is not None:
                raise others from None
            if not started:
                logger.error("startup failed", exc_info=errors)
                reason = f"presa_trio: {single(errors) if errors is not None else exc!r}"
                await send({"type": "lifespan.startup.failed", "message": reason})
                return
            # A crash after startup is the run's, not the lifespan protocol's: log it, keep
            # answering requests (503 from now on) and finish the protocol when asked to.
            logger.error("the server's run failed after startup", exc_info=errors)
            while not stopping:
                stopping = (await receive())["type"] == "lifespan.shutdown"
        self.shutdown_bound.cancel()
        await send({"type": "lifespan.shutdown.complete"})

    # ------------------------------------------------------------------ http

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = _own_path(scope)
        metadata = path in self._metadata_paths
        if path != self.path and not metadata:
            await _plain(send, 404, b"Not Found")
            return
        hosts, origins, credentials, mcp_headers = _scan_headers(scope["headers"])
        reason = refuse_any(self.host_policy, hosts, origins)
        if reason is not None:
            await self._refuse(send, Forbidden(f"Forbidden: {reason}"))
            return
        allowed = cors.allow_origin(origins) if self.cors else []
        if allowed and self.auth is not None:
            allowed.append(cors.EXPOSE_AUTH)
        if self.auth is not None and metadata:
            await _metadata(self.auth, self.cors, scope, send, allowed)
            return
        if self.cors and scope["method"] == "OPTIONS":
            await _plain(send, 204, b"", [*allowed, *cors.preflight(scope["headers"])])
            return
        if scope["method"] != "POST":
            await _plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST")])
            return
        # Authorization comes before the body is read: nothing of an unauthenticated
        # request is processed (spec basic/authorization §Access Token Privilege Restriction).
        authorization = _NO_TOKEN
        if self.auth is not None:
            try:
                token = await self.auth.authenticate(credentials)
            except McpError as refusal:
                await self._refuse(send, refusal, allowed)
                return
            authorization = Authorization(token, self.auth)
        read: bytes | McpError | None = None  # the body, or why there is none to serve
        # One cancel scope per request: its deadline bounds the body's arrival (it is lifted
        # once the request waits for anything else, see ``_serve``); the client's disconnect
        # (or a write it stops reading) cancels it; and its deadline bounds the final write
        # (``HttpResponder``). The run's ``Deadlines`` keeps both; a request begun before
        # the run leaves both to trio (the keeper could not take over trio's deadline).
        deadlines = self._deadlines if self._watchers is not None else _TRIOS
        with trio.CancelScope() as request:
            deadlines.arm(request, self.body_timeout)
            try:
                read = await self._read_body(receive)
                if isinstance(read, bytes):
                    responder = HttpResponder(send, request, self.write_timeout, allowed, deadlines)
                    await self._serve(
                        read, scope, mcp_headers, receive, request, deadlines, responder,
                        authorization,
                    )  # fmt: skip
            finally:
                deadlines.disarm(request)
        if read is None and request.cancelled_caught:
            read = RequestTimeout(f"Request body not received within {self.body_timeout:g} s")
        if isinstance(read, McpError):
            await self._refuse(send, read, allowed)

    async def _refuse(
        self, send: Send, error: McpError, extra: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        """Answer ``error`` before the request is dispatched: outside its scope, so the
        write is bounded by a shielded ``write_timeout`` of its own."""
        responder = HttpResponder(send, write_timeout=self.write_timeout, extra=extra)
        await self.dispatcher.refuse(error, None, responder)

    async def _serve(
        self,
        body: bytes,
        scope: Scope,
        mcp_headers: dict[str, list[bytes]],
        receive: Receive,
        request: trio.CancelScope,
        deadlines: Deadlines,
        responder: HttpResponder,
        authorization: Authorization,
    ) -> None:
        """Parse the body and dispatch it, cancelled if the client goes away meanwhile."""
        try:
            message = parse_message(body)
        except EnvelopeError as exc:
            await self.dispatcher.refuse(exc.error, exc.request_id, responder)
            return
        if isinstance(message, Notification):
            await _plain(responder.send, 202, b"")  # accepted; stdio is where they matter
            return
        headers = RoutingHeaders.grouped(mcp_headers)
        runtime, watchers = self._runtime, self._watchers
        traced = self.dispatcher.settings.tracing is not None
        connection = http_attributes(scope) if traced else None
        watch: trio.CancelScope | None = None

        def once_it_waits() -> None:
            # From its first wait on, the request runs for as long as it takes (the body's
            # deadline is lifted), watched for its client's disconnect. Until then nothing
            # can cancel it: a request answered at once needs neither, nor one whose first
            # wait is its final write (which has a deadline of its own). Without a run
            # there is nothing to watch: it is answered 503 at once.
            nonlocal watch
            if responder.finishing:
                return
            deadlines.disarm(request)
            if watchers is not None:
                watch = trio.CancelScope()
                watchers.start_soon(_cancel_on_disconnect, receive, request, watch, responder)

        serving = self.dispatcher.serve(
            message, headers, responder, runtime, authorization, connection=connection
        )
        try:
            await await_noticing_wait(serving, once_it_waits)
        finally:
            if watch is not None:
                watch.cancel()

    async def _read_body(self, receive: Receive) -> bytes | RequestTooLarge | None:
        """The whole body, the refusal to answer when it is too large, or None when the
        client has gone; the caller's scope bounds the time it may take."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return RequestTooLarge(f"Request body exceeds {self.max_body} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _metadata(
    auth: BearerAuth, with_cors: bool, scope: Scope, send: Send, allowed: list[tuple[bytes, bytes]]
) -> None:
    """The Protected Resource Metadata document (RFC 9728 §3), to anyone who asks: it is
    what a client without a token needs to find the authorization server."""
    if with_cors and scope["method"] == "OPTIONS":
        await _plain(send, 204, b"", [*allowed, *cors.preflight(scope["headers"], b"GET")])
    elif scope["method"] != "GET":
        await _plain(send, 405, b"Method Not Allowed", [(b"allow", b"GET")])
    else:
        await HttpResponder(send, extra=allowed).finish(auth.metadata_body, 200)


async def _cancel_on_disconnect(
    receive: Receive, request: trio.CancelScope, watch: trio.CancelScope, responder: HttpResponder
) -> None:
    """Cancel ``request`` when its client goes away, unless its final write has begun (that
    write is the server's to finish); ``watch`` is cancelled once the request is over.

    Hypercorn (like uvicorn) says ``http.disconnect`` as soon as a response is complete, so
    the watcher usually wakes with it right after the final write and ends on its own; with
    a server that does not, cancelling ``watch`` ends it.
    """
    with watch:
        message = await receive()
        while message["type"] != "http.disconnect":
            message = await receive()
        if not watch.cancel_called and not responder.finishing:  # still the client's
            request.cancel()


def _scan_headers(
    raw: Iterable[tuple[bytes, bytes]],
) -> tuple[list[str], list[str], list[str], dict[str, list[bytes]]]:
    """One pass over the request headers: every Host, Origin and Authorization value in
    order, and the ``Mcp-*`` headers grouped by name for ``RoutingHeaders``. ASGI servers
    give the names in lower case; one that does not is read the same."""
    kept: tuple[list[str], list[str], list[str]] = ([], [], [])
    mcp: dict[str, list[bytes]] = {}
    for name, value in raw:
        try:
            kind = _KINDS[name]
        except KeyError:
            kind = _kind_of(name)
        if kind is None:
            continue
        if isinstance(kind, int):
            kept[kind].append(value.decode("latin-1"))
        else:
            mcp.setdefault(kind, []).append(value)
    return *kept, mcp


_KEPT = {b"host": 0, b"origin": 1, b"authorization": 2}  # their places in ``kept`` above
# What the first distinct header names are to the scan (a client sends the same few on
# every request); a name beyond them, or longer than any real one, is worked out each time
# it comes. At most 256 names of at most 64 bytes stay.
_KINDS: dict[bytes, int | str | None] = {}
_MAX_KINDS = 256
_LONGEST_KEPT_NAME = 64


def _kind_of(name: bytes) -> int | str | None:
    """Where the scan puts a header: its place in ``kept``, the lower-case name of an
    ``mcp-*`` header, or None for any other header (nothing here reads it)."""
    lower = name.lower()
    kind: int | str | None = _KEPT.get(lower)
    if kind is None and lower.startswith(b"mcp-"):
        kind = lower.decode("latin-1")
    if len(_KINDS) < _MAX_KINDS and len(name) <= _LONGEST_KEPT_NAME:
        _KINDS[name] = kind
    return kind


def _own_path(scope: Scope) -> str:
    """The request path below the app's mount point: a host app that mounts this one (a
    Starlette ``Mount("/deploy", app)``, say) passes the full path with the mount point as
    ``root_path``, so ``/deploy/mcp`` is this app's ``/mcp``."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


@final
class HttpResponder:
    """Answers one request as JSON, or as SSE from its first notification on.

    Every write has a deadline: a client that stops reading is treated as gone (its request's
    scope is cancelled and nothing more is written), so it cannot pin the connection, the
    response's memory or the handler. The final write is not the client's to interrupt: the
    server finishes (or closes) the HTTP exchange inside it, and a cancel landing there, such
    as the disconnect watcher's, would leave the connection open for good. It runs under the
    request's own scope (``scope``), whose deadline it moves (in ``deadlines``) to
    ``write_timeout`` from now and whose disconnect watcher stands down once it begins;
    without a request scope (an answer decided before the body is read), under a shielded
    scope of its own.
    """

    __slots__ = (
        "_deadlines",
        "_extra",
        "_gone",
        "_scope",
        "_streaming",
        "_write_timeout",
        "finishing",
        "send",
    )

    def __init__(
        self,
        send: Send,
        scope: trio.CancelScope | None = None,
        write_timeout: float = math.inf,
        extra: list[tuple[bytes, bytes]] | None = None,
        deadlines: Deadlines = _TRIOS,
    ) -> None:
        self.send = send
        self._extra = extra or []
        self._scope = scope
        self._deadlines = deadlines
        self._write_timeout = write_timeout
        self._streaming = False
        self._gone = False
        self.finishing = False  # the final write has begun

    def _write(
        self, message: Message, then: Message | None = None, *, final: bool = False
    ) -> Awaitable[None]:
        """Send ``message`` (and ``then`` right after it) within one ``write_timeout``: the
        coroutine that does it, handed on (every write passes here, and a frame of its own
        would pass each of the write's yields on again)."""
        if final and self._scope is not None and not self._gone:
            return self._final_write(self._scope, message, then)
        return self._bounded_write(message, then, final)

    async def _bounded_write(self, message: Message, then: Message | None, final: bool) -> None:
        if self._gone:
            await trio.lowlevel.checkpoint()
            return
        with trio.move_on_after(self._write_timeout, shield=final) as late:
            await self.send(message)
            if then is not None:
                await self.send(then)
        if late.cancelled_caught:
            self._drop()
            if self._scope is not None:
                self._scope.cancel()

    async def _final_write(
        self, request: trio.CancelScope, message: Message, then: Message | None
    ) -> None:
        """The last write, bounded by the request's scope: every request takes this path,
        and moving a deadline costs a fraction of entering and leaving a scope of its own."""
        self._deadlines.arm(request, self._write_timeout)
        try:
            await self.send(message)
            if then is not None:
                await self.send(then)
        except trio.Cancelled:
            if self._deadlines.passed(request):  # it is the write's deadline
                self._drop()
            raise

    def _drop(self) -> None:
        logger.info(
            "a client stopped reading for %s s; its request is dropped", self._write_timeout
        )
        self._gone = True

    async def _start_stream(self) -> None:
        self._streaming = True
        headers = [*sse.HEADERS, *self._extra]
        await self._write({"type": "http.response.start", "status": 200, "headers": headers})

    async def notify(self, data: bytes) -> None:
        if not self._streaming:
            await self._start_stream()
        message = {"type": "http.response.body", "body": sse.event(data), "more_body": True}
        await self._write(message)

    async def keepalive(self) -> None:
        if not self._streaming:
            await self._start_stream()
        await self._write({"type": "http.response.body", "body": sse.KEEPALIVE, "more_body": True})

    async def finish(
        self, data: bytes, status: int, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.finishing = True
        if self._streaming:
            await self._write({"type": "http.response.body", "body": sse.event(data)}, final=True)
            return
        # A whole JSON response: its start and its body are one final write (one deadline).
        fields = [*_JSON, (b"content-length", str(len(data)).encode())]
        for name, value in headers:  # an error's own (Retry-After, WWW-Authenticate)
            fields.append((name.encode("latin-1"), value.encode("latin-1")))
        fields += self._extra
        start = {"type": "http.response.start", "status": status, "headers": fields}
        await self._write(start, {"type": "http.response.body", "body": data}, final=True)


async def _plain(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:  # status answers decided before anything is read: nothing to cancel yet
    headers = [*_PLAIN, (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
