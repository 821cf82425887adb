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
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Unpack, final

import trio

from .._boundary import partition, single
from .._kernel.dispatcher import Dispatcher
from .._kernel.runtime import Runtime
from .._kernel.tracing import http_attributes
from .._process.shutdown import ShutdownBound
from .._protocol import cors, era, sse
from .._protocol.cors import Cors
from .._protocol.cors import expose as exposed_headers
from .._protocol.dialect import PROTOCOL_VERSION
from .._protocol.headers import (
    PROTOCOL_VERSION_HEADER,
    HostPolicy,
    RoutingHeaders,
    refuse_any,
    scan,
)
from .._protocol.jsonrpc import (
    EnvelopeError,
    Notification,
    Request,
    RequestId,
    Response,
    parse_any,
)
from ..auth._bearer import Authorization, BearerAuth
from ..errors import Forbidden, InvalidRequest, McpError, RequestTimeout, RequestTooLarge
from ._asgi_types import Asgi, Message, Receive, Scope, Send
from .mount import MetadataApp, Mounted
from .timeouts import DEFAULT_TIMEOUTS, OldTimeouts, Timeouts, regroup_timeouts

OpenRuntime = Callable[[], AbstractAsyncContextManager[Runtime]]

logger = logging.getLogger("presa_trio.http")

_JSON = [(b"content-type", b"application/json")]
_PLAIN = [(b"content-type", b"text/plain; charset=utf-8")]
_NO_TOKEN = Authorization()  # an app that verifies no tokens (frozen: one for all requests)
DEFAULT_MAX_BODY = 4 * 1024 * 1024
_SESSION_METHODS = frozenset({"GET", "DELETE"})  # an older-era session's, besides POST
_NO_RESPONSES = InvalidRequest("Invalid request: clients must not send responses")


@final
class AsgiApp:
    """The MCP endpoint of one server; make it with ``server.asgi_app(...)``.

    ``path`` is the endpoint (``/mcp``); ``max_body`` caps a request body in bytes (413
    beyond it, read no further); ``host_policy`` guards against DNS rebinding (loopback
    names only by default). ``timeouts`` (``presa_trio.Timeouts``) bounds the time a request
    body may take to arrive (408 after it) and each write to a client that has stopped
    reading (its request is then dropped like a disconnected one). The ASGI lifespan runs the
    server; a host application that does not forward its lifespan to this app enters
    ``app.lifespan()`` itself. ``shutdown_timeout`` is process policy, off by default (None):
    given, the process is gone within that many seconds of the lifespan's shutdown (or of
    ``begin_shutdown``), whatever still runs; for a program that runs hypercorn itself and
    owns its process (``presa-trio serve`` keeps a bound of its own). With ``auth`` (a
    ``presa_trio.auth.BearerAuth``) every request needs a valid bearer token, checked before
    its body is read, and the app also answers ``GET`` for its Protected Resource Metadata
    at ``/.well-known/oauth-protected-resource`` (bare, and followed by the endpoint's path
    or the ``resource``'s); mounted under a prefix, the host serves it at its root with
    ``metadata_app()`` (``mounted`` does that itself).
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        open_runtime: OpenRuntime,
        *,
        path: str = "/mcp",
        max_body: int = DEFAULT_MAX_BODY,
        host_policy: HostPolicy | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        shutdown_timeout: float | None = None,
        cors: bool | Cors = False,
        auth: BearerAuth | None = None,
        **deprecated: Unpack[OldTimeouts],
    ) -> None:
        if deprecated:
            timeouts = regroup_timeouts(timeouts, deprecated, "AsgiApp")
        self.dispatcher = dispatcher
        self.cors: Cors | None = None
        if isinstance(cors, Cors):
            self.cors = cors
        elif cors:
            self.cors = Cors()
        self.auth = auth
        self._open_runtime = open_runtime
        self._runtime: Runtime | None = None
        self.path = path
        self.max_body = max_body
        self.host_policy = host_policy if host_policy is not None else HostPolicy()
        self.timeouts = timeouts
        self.body_timeout = timeouts.body  # read by every request
        self.write_timeout = timeouts.write
        self.shutdown_bound = ShutdownBound(shutdown_timeout)
        self._metadata_paths = auth.metadata_paths(path) if auth is not None else frozenset()
        self._sessions = dispatcher.legacy is not None
        # What a browser may read of every answer (computed once: read per request).
        self._exposed = exposed_headers(auth=auth is not None, sessions=self._sessions)

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
        async with self._open_runtime() as runtime:
            self._runtime = runtime
            try:
                yield runtime
            finally:
                self._runtime = None

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
        """The process is stopping: drain, and start the ``shutdown_timeout`` clock (an app
        given one)."""
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
        hosts, origins, credentials, mcp_headers = scan(scope["headers"])
        reason = refuse_any(self.host_policy, hosts, origins)
        if reason is not None:
            await self._refuse(send, Forbidden(f"Forbidden: {reason}"))
            return
        allowed = cors.allow_origin(origins) if self.cors else []
        if allowed and self._exposed is not None:
            allowed.append(self._exposed)
        if self.auth is not None and metadata:
            await _metadata(self.auth, self.cors, scope, send, allowed)
            return
        if self.cors and scope["method"] == "OPTIONS":
            methods = cors.SESSION_METHODS if self._sessions else b"POST"
            answer = cors.preflight(scope["headers"], methods, self.cors.allow_headers)
            await _plain(send, 204, b"", [*allowed, *answer])
            return
        method = scope["method"]
        if method != "POST" and not (
            method in _SESSION_METHODS and era.SESSION_HEADER in mcp_headers and self._sessions
        ):
            # GET and DELETE are a session's only: without one, only POST is served here.
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
        if method != "POST":  # an older-era session's GET stream, or its end
            await self._session_exchange(
                method, scope["headers"], mcp_headers, receive, send, allowed, authorization
            )
            return
        read: bytes | McpError | None = None  # the body, or why there is none to serve
        # A nursery per request holds its disconnect watcher beside the dispatcher; its
        # scope's deadline bounds the body's arrival, then the final write (``HttpResponder``);
        # the client's disconnect, or a write it stops reading, cancels it.
        async with trio.open_nursery() as request:
            request.cancel_scope.deadline = trio.current_time() + self.body_timeout
            read = await self._read_body(receive)
            if isinstance(read, bytes):
                request.cancel_scope.deadline = math.inf  # the handler takes its own time
                await self._serve(request, read, scope, mcp_headers, receive, send, allowed,
                                  authorization)  # fmt: skip
        if read is None and request.cancel_scope.cancelled_caught:
            read = RequestTimeout(f"Request body not received within {self.body_timeout:g} s")
        if isinstance(read, McpError):
            await self._refuse(send, read, allowed)

    async def _refuse(
        self,
        send: Send,
        error: McpError,
        extra: list[tuple[bytes, bytes]] | None = None,
        request_id: RequestId | None = None,
    ) -> None:
        """Answer ``error`` before the request is dispatched: there is no request to
        cancel yet, so the write is bounded by a shielded ``write_timeout`` of its own."""
        responder = HttpResponder(send, write_timeout=self.write_timeout, extra=extra)
        await self.dispatcher.refuse(error, request_id, responder)

    async def _serve(
        self,
        request: trio.Nursery,
        body: bytes,
        scope: Scope,
        mcp_headers: dict[str, list[bytes]],
        receive: Receive,
        send: Send,
        allowed: list[tuple[bytes, bytes]],
        authorization: Authorization,
    ) -> None:
        """Parse the body and dispatch it in the ``request`` nursery, beside the watcher
        that cancels it if its client goes away meanwhile."""
        try:
            message = parse_any(body)
        except EnvelopeError as exc:
            await self._refuse(send, exc.error, allowed, exc.request_id)
            return
        if self._sessions and (
            era.SESSION_HEADER in mcp_headers
            or mcp_headers.get(PROTOCOL_VERSION_HEADER) != _MODERN_VERSION
        ):  # one look: a 2026-07-28 request (one 2026-07-28 version header) goes on below
            request_id = None if isinstance(message, Notification) else message.id
            routing = RoutingHeaders.grouped(mcp_headers)
            try:
                session_id = routing.get(era.SESSION_HEADER)
            except McpError as malformed:  # repeated, or not visible ASCII: named in a 400
                await self._refuse(send, malformed, allowed, request_id)
                return
            try:
                version = routing.get(PROTOCOL_VERSION_HEADER)
            except McpError as malformed:
                if session_id is not None:  # a session's message: named in a 400
                    await self._refuse(send, malformed, allowed, request_id)
                    return
                version, legacy = None, False  # 2026-07-28 refuses it below, as ever
            else:
                method = None if isinstance(message, Response) else message.method
                legacy = era.classify_http(session_id, version, method, message) is era.Era.LEGACY
            if legacy:
                await self._serve_session(
                    request,
                    message,
                    session_id,
                    version,
                    routing,
                    receive,
                    send,
                    allowed,
                    authorization,
                )
                return
        if isinstance(message, Response):
            await self._refuse(send, _NO_RESPONSES, allowed, message.id)
            return
        if isinstance(message, Notification):  # accepted; stdio is where they matter
            request.cancel_scope.deadline = trio.current_time() + self.write_timeout
            await _plain(send, 202, b"")
            return
        headers = RoutingHeaders.grouped(mcp_headers)
        traced = self.dispatcher.settings.tracing is not None
        connection = http_attributes(scope) if traced else None
        responder = HttpResponder(send, request.cancel_scope, self.write_timeout, allowed)
        request.start_soon(_cancel_on_disconnect, receive, request.cancel_scope, responder)
        await self.dispatcher.serve(
            message, headers, responder, self._runtime, authorization, connection=connection
        )
        request.cancel_scope.cancel()  # answered: the watcher's work is done

    @property
    def serves_sessions(self) -> bool:
        """Whether this app serves the older era's sessions (``Server(legacy=...)``)."""
        return self._sessions

    async def _serve_session(
        self,
        request: trio.Nursery,
        message: Request | Notification | Response,
        session_id: str | None,
        version: str | None,
        routing: RoutingHeaders,
        receive: Receive,
        send: Send,
        allowed: list[tuple[bytes, bytes]],
        authorization: Authorization,
    ) -> None:
        """One POST of the older era: a request (``initialize`` opens a session), or a
        notification or an answer of the client's (202 once taken)."""
        runtime, dispatcher = self._runtime, self.dispatcher
        request_id = message.id if isinstance(message, Request | Response) else None
        if version is not None and version not in era.LEGACY_VERSIONS:
            await self._refuse(send, _unsupported(version), allowed, request_id)
            return
        responder = HttpResponder(send, request.cancel_scope, self.write_timeout, allowed)
        if not isinstance(message, Request):
            refusal = await dispatcher.session_exchange(
                "POST", session_id, responder, runtime, authorization, message, routing
            )
            if refusal is None:
                await _plain(send, 202, b"", allowed)
            else:
                await dispatcher.refuse_session(refusal, request_id, responder)
            return
        opening = None
        if message.method == "initialize" and session_id is None:
            opening = era.new_session_id()
        request.start_soon(_cancel_on_disconnect, receive, request.cancel_scope, responder)
        await dispatcher.serve_session(
            message,
            session_id,
            responder,
            runtime,
            authorization,
            new_session=opening,
            headers=routing,
        )
        request.cancel_scope.cancel()  # answered: the watcher's work is done

    async def _session_exchange(
        self,
        method: str,
        scope_headers: Iterable[tuple[bytes, bytes]],
        mcp_headers: dict[str, list[bytes]],
        receive: Receive,
        send: Send,
        allowed: list[tuple[bytes, bytes]],
        authorization: Authorization,
    ) -> None:
        """An older-era session's GET stream (until the session ends, the client goes or
        the run drains), the resumption of a request's stream (``Last-Event-ID``), or its
        ``DELETE``."""
        routing = RoutingHeaders.grouped(mcp_headers)
        last_event_id = _last_event_id(scope_headers) if method == "GET" else None
        try:
            session_id = routing.get(era.SESSION_HEADER)
            version = routing.get(PROTOCOL_VERSION_HEADER)
        except McpError as error:
            await self._refuse(send, error, allowed)
            return
        if version is not None and version not in era.LEGACY_VERSIONS:
            await self._refuse(send, _unsupported(version), allowed)
            return
        async with trio.open_nursery() as request:
            responder = HttpResponder(send, request.cancel_scope, self.write_timeout, allowed)
            if method == "GET":
                request.start_soon(_cancel_on_disconnect, receive, request.cancel_scope, responder)
            refusal = await self.dispatcher.session_exchange(
                method,
                session_id,
                responder,
                self._runtime,
                authorization,
                None,
                routing,
                last_event_id,
            )
            if refusal is not None and not responder.streaming:
                await self.dispatcher.refuse_session(refusal, None, responder)
            elif responder.streaming:
                await responder.end_stream()
            else:
                await _plain(send, 200, b"", allowed)
            request.cancel_scope.cancel()

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
    auth: BearerAuth,
    settings: Cors | None,
    scope: Scope,
    send: Send,
    allowed: list[tuple[bytes, bytes]],
) -> None:
    """The Protected Resource Metadata document (RFC 9728 §3), to anyone who asks: it is
    what a client without a token needs to find the authorization server."""
    if settings is not None and scope["method"] == "OPTIONS":
        answer = cors.preflight(scope["headers"], b"GET", settings.allow_headers)
        await _plain(send, 204, b"", [*allowed, *answer])
    elif scope["method"] != "GET":
        await _plain(send, 405, b"Method Not Allowed", [(b"allow", b"GET")])
    else:
        await HttpResponder(send, extra=allowed).finish(auth.metadata_body, 200)


async def _cancel_on_disconnect(
    receive: Receive, request: trio.CancelScope, responder: HttpResponder
) -> None:
    """Cancel ``request`` when its client goes away, unless its final write has begun (that
    write is the server's to finish). Hypercorn (like uvicorn) says ``http.disconnect`` as
    soon as a response is complete, so the watcher usually ends on its own right after the
    final write; with a server that does not, the request's end cancels it."""
    while (await receive())["type"] != "http.disconnect":
        pass
    if responder.keeps_running:  # a resumable stream: its client comes back for the rest
        responder.client_gone()
    elif not responder.finishing:  # still the client's
        request.cancel()


_MODERN_VERSION = [PROTOCOL_VERSION.encode()]


def _last_event_id(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The ``Last-Event-ID`` of a GET (read only there): a resumed stream's last event."""
    for name, value in headers:
        if name.lower() == b"last-event-id":
            return value.decode("latin-1")
    return None


def _unsupported(version: str) -> InvalidRequest:
    """A session's message naming a version its sessions do not speak (2025 transports:
    400)."""
    return InvalidRequest(f"Bad Request: Unsupported protocol version: {version}")


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

    Every write has a deadline, ``write_timeout`` from its start: a client that stops reading
    is treated as gone (its request's scope is cancelled and nothing more is written), so it
    cannot pin the connection, the response's memory or the handler. The final write is not
    the client's to interrupt: the server finishes (or closes) the HTTP exchange inside it,
    and a cancel landing there would leave the connection open for good, so the disconnect
    watcher stands down once it begins (``finishing``). Without a request scope (an answer
    decided before the request is dispatched) the final write is shielded: nothing of the
    request's is left to cancel it.
    """

    #: It carries an older-era session's resumable streams (``_kernel.resumable``).
    carries_resumable_streams = True

    __slots__ = (
        "_extra",
        "_gone",
        "_scope",
        "_streaming",
        "_write_timeout",
        "finishing",
        "keeps_running",
        "send",
    )

    def __init__(
        self,
        send: Send,
        scope: trio.CancelScope | None = None,
        write_timeout: float = math.inf,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        self.send = send
        self._extra = extra or []
        self._scope = scope
        self._write_timeout = write_timeout
        self._streaming = False
        self._gone = False
        self.finishing = False  # the final write has begun
        # A resumable stream's (an older-era session's): a client that goes away, or
        # stops reading, leaves the request running (it reconnects with Last-Event-ID).
        self.keeps_running = False

    async def _write(self, message: Message, then: Message | None = None) -> None:
        """Send ``message`` (and ``then`` right after it) within one ``write_timeout``."""
        if self._gone:
            await trio.lowlevel.checkpoint()
            return
        request = self._scope
        if self.finishing and request is not None:
            await self._final_write(request, message, then)
            return
        with trio.move_on_after(self._write_timeout, shield=self.finishing) as late:
            await self.send(message)
            if then is not None:
                await self.send(then)
        if late.cancelled_caught:
            self._drop()
            if request is not None and not self.keeps_running:
                request.cancel()

    async def _final_write(
        self, request: trio.CancelScope, message: Message, then: Message | None
    ) -> None:
        """The last write, under the request's own scope: its deadline becomes the write's
        (nothing is left of the request to outlast it)."""
        request.deadline = trio.current_time() + self._write_timeout
        try:
            await self.send(message)
            if then is not None:
                await self.send(then)
        except trio.Cancelled:
            if trio.current_time() >= request.deadline:  # it is the write's deadline
                self._drop()
            raise

    def _drop(self) -> None:
        logger.info(
            "a client stopped reading for %s s; its request is dropped", self._write_timeout
        )
        self._gone = True

    def client_gone(self) -> None:
        """The client went away: nothing more is written (what a resumable stream sends
        from now on is only logged)."""
        self._gone = True

    # ---------------------------------------------------------------- resumable streams

    def keep_running(self) -> None:
        self.keeps_running = True

    async def send_event(self, framed: bytes, *, final: bool = False) -> None:
        """Send an SSE event already framed (with its id); ``final`` ends the response."""
        if not self._streaming:
            await self._start_stream()
        if final:
            self.finishing = True
        await self._write({"type": "http.response.body", "body": framed, "more_body": not final})

    async def close_connection(self) -> None:
        """End the response now, its request going on (a resumable stream's client comes
        back with Last-Event-ID). Bounded and shielded like a final write, but it sets no
        deadline on the request."""
        if self._gone or self.finishing:
            await trio.lowlevel.checkpoint()
            return
        if not self._streaming:
            await self._start_stream()
        with trio.move_on_after(self._write_timeout, shield=True):
            await self.send({"type": "http.response.body", "body": b""})
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

    @property
    def streaming(self) -> bool:
        """Whether the response has started as an SSE stream."""
        return self._streaming

    async def end_stream(self) -> None:
        """End a stream that has no final message (an older-era session's GET stream), if
        nothing ended it yet."""
        if self.finishing:
            await trio.lowlevel.checkpoint()
            return
        self.finishing = True
        await self._write({"type": "http.response.body", "body": b""})

    async def keepalive(self) -> None:
        if not self._streaming:
            await self._start_stream()
        await self._write({"type": "http.response.body", "body": sse.KEEPALIVE, "more_body": True})

    async def finish(
        self, data: bytes, status: int, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.finishing = True
        if self._streaming:
            await self._write({"type": "http.response.body", "body": sse.event(data)})
            return
        # A whole JSON response: its start and its body are one final write (one deadline).
        fields = [*_JSON, (b"content-length", str(len(data)).encode())]
        for name, value in headers:  # an error's own (Retry-After, WWW-Authenticate)
            fields.append((name.encode("latin-1"), value.encode("latin-1")))
        fields += self._extra
        start = {"type": "http.response.start", "status": status, "headers": fields}
        await self._write(start, {"type": "http.response.body", "body": data})


async def _plain(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:  # status answers decided before anything is read: nothing to cancel yet
    headers = [*_PLAIN, (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
