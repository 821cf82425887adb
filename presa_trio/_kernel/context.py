"""The request context a handler sees: who asked, with which capabilities, and a way back.

A ``Context`` lives exactly as long as one request (wire §2: nothing is remembered between
requests). It carries request-scoped notifications (progress, log) to the request's own
response stream and asks the client for input with one verb, ``await ctx.input(...)``; it
never sends a request to the client (wire §13.3). The run it belongs to is ``ctx.runtime``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, final, overload, runtime_checkable

import trio

from .._protocol import dialect
from .._protocol.dialect import RequestMeta
from .._protocol.headers import RoutingHeaders
from .._protocol.input_requests import InputRequired, can_ask, check_askable, check_responses
from .._protocol.jsonrpc import RequestId, encode, notification_message
from .._protocol.schema import Schemas
from .._protocol.tokens import AccessToken
from ..errors import InternalError, MissingCapability
from .authorization import Authorization
from .runtime import Runtime, ServiceProvider
from .sessions import SessionRecord

logger = logging.getLogger("presa_trio")

InputRequests = Mapping[str, Mapping[str, Any]]
InputProvider = Callable[["Context", InputRequests], Awaitable[dict[str, Any]]]
PrincipalOf = Callable[["Context"], str]
_S = TypeVar("_S")
_NO_RESPONSES: Mapping[str, Any] = MappingProxyType({})  # a request that is not a retry


class Responder(Protocol):
    """How a transport carries one request's messages back to its client.

    Messages arrive encoded (compact one-line UTF-8 JSON): the dispatcher encodes each once,
    and only what encodes is ever sent.
    """

    async def notify(self, data: bytes) -> None:
        """Send a request-scoped notification (may turn the response into a stream)."""

    async def keepalive(self) -> None:
        """Keep a quiet long-lived stream open (an SSE comment on HTTP)."""

    async def finish(
        self, data: bytes, status: int, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Send the final response; ``status`` and ``headers`` (an error's
        ``WWW-Authenticate``, say) are for HTTP, if no stream started yet."""


@runtime_checkable
class Reconnectable(Protocol):
    """A responder whose connection can close while its request runs on (a resumable
    stream: its client reconnects). A transport's own ``close_connection`` is not this:
    closing a stream that is not logged would lose its answer."""

    async def hang_up(self) -> None: ...


def notification_data(
    schemas: Schemas, definitions: Mapping[str, str], message: dict[str, Any], *, check: bool
) -> bytes:
    """A handler's notification as the bytes to send: checked against its ``$def`` in
    ``schemas`` (``definitions`` by method) when ``check``, and encoded; -32603 for one that
    is invalid or not JSON (the request fails, nothing broken is sent)."""
    if check:
        definition = definitions.get(message["method"], "JSONRPCNotification")
        violations = schemas.violations(definition, message)
        if violations:
            raise InternalError(f"Server built an invalid notification: {violations[0]}")
    try:
        return encode(message)
    except (ValueError, UnicodeEncodeError):
        raise InternalError("Server built a notification that is not JSON") from None


@final
@dataclass(frozen=True, slots=True)
class ServerView:
    """What every ``Context`` of one server shares, made once with the server's dispatcher:
    its schemas, who names a request's principal, whether it logs, and how a notification
    reaches a responder (checked and encoded: ``send``)."""

    schemas: Schemas
    send: Callable[[Responder, dict[str, Any]], Awaitable[None]]
    principal_of: PrincipalOf | None = None
    logging: bool = False


def _split(
    requests: InputRequests, responses: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Mapping[str, Any]]]:
    """The answers ``responses`` has for ``requests``, and the requests they leave. (Out of
    ``Context.input``: its comprehensions would give it cells, which a parked task holds.)"""
    found = {k: responses[k] for k in requests if k in responses}
    return found, {k: v for k, v in requests.items() if k not in found}


@final
class Context:
    """Everything a tool, resource or prompt handler may know about its request.

    Declare a parameter annotated ``Context`` and presa_trio passes it in; it never shows up
    in the tool's ``inputSchema``.
    """

    __slots__ = (
        "_authorization",
        "_extras",
        "_last_progress",
        "_lifespan_key",
        "_principal",
        "_provide",
        "_responder",
        "_server",
        "headers",
        "meta",
        "method",
        "params",
        "request_id",
        "round",
        "runtime",
        "session",
        "state",
    )

    def __init__(
        self,
        request_id: RequestId,
        method: str,
        params: Mapping[str, Any],
        meta: RequestMeta,
        *,
        runtime: Runtime,
        server: ServerView,
        responder: Responder | None = None,
        headers: RoutingHeaders | None = None,
        authorization: Authorization | None = None,
    ) -> None:
        self.request_id = request_id
        self.method = method
        self.params = params
        self.meta = meta
        self.runtime = runtime
        self._server = server
        # Where notifications go: None for a detached context (a task has no stream).
        self._responder = responder
        # The HTTP routing headers (None on stdio): tools/call checks Mcp-Param-* with them.
        self.headers = headers
        # How the HTTP request was authorized; None on stdio, where it does not apply.
        self._authorization = authorization
        # MRTR (wire §10): the verified state of the round a retry closes, and its number.
        self.state: Mapping[str, Any] | None = None
        self.round = 0
        # Who answers ``await ctx.input(...)`` instead of an MRTR round (a task parks there).
        self._provide: InputProvider | None = None
        self._principal: str | None = None
        self._last_progress: float | None = None
        self._extras: dict[str, Any] | None = None
        # Whose lifespan ``ctx.lifespan`` is: None for the server's own, else a mounted
        # server's (set when one of its handlers is called: ``serve_mounted``).
        self._lifespan_key: object = None
        #: The older-era session this request belongs to (a ``SessionRecord``: its version,
        #: the client's info); None for a 2026-07-28 request.
        self.session: SessionRecord | None = None

    @property
    def schemas(self) -> Schemas:
        """The server's schemas (what requests and results are checked against)."""
        return self._server.schemas

    @property
    def input_responses(self) -> Mapping[str, Any]:
        """The answers a retry brought (wire §10), by input request key; empty otherwise."""
        responses = self.params.get("inputResponses")
        return responses if isinstance(responses, dict) else _NO_RESPONSES

    @property
    def extras(self) -> dict[str, Any]:
        """Per-request scratch space for extensions and middleware; dies with the request."""
        if self._extras is None:
            self._extras = {}
        return self._extras

    # ------------------------------------------------------------------ who is asking

    @property
    def capabilities(self) -> Mapping[str, Any]:
        """This request's client capabilities (never an earlier request's)."""
        return self.meta.client_capabilities

    @property
    def principal(self) -> str:
        """Who is asking: the server's ``principal`` function decides; without one, it is
        the verified token's principal (its subject, see ``AccessToken.principal``), and ""
        when there is no token."""
        if self._principal is None:
            principal_of = self._server.principal_of
            if principal_of is not None:
                self._principal = principal_of(self)
            else:
                token = self.access_token
                self._principal = token.principal if token is not None else ""
        return self._principal

    @property
    def access_token(self) -> AccessToken | None:
        """The verified bearer token of this request (``presa_trio.auth``), or None: on
        stdio, and over HTTP when the app verifies no tokens. Never pass it on to another
        service (spec basic/authorization §Access Token Privilege Restriction)."""
        authorization = self._authorization
        return authorization.token if authorization is not None else None

    def require_scopes(self, *scopes: str) -> None:
        """Raise 403 ``insufficient_scope`` (its challenge naming ``scopes``) unless this
        request's token holds them all; an HTTP app that verifies no tokens refuses any
        scope. On stdio it does nothing: authorization does not apply there (spec
        basic/authorization §Protocol Requirements)."""
        if self._authorization is not None:
            self._authorization.require(scopes)

    def has_capability(self, *path: str) -> bool:
        """``ctx.has_capability("elicitation", "url")`` is True when declared on this request."""
        return dialect.has_capability(self.meta.client_capabilities, *path)

    def require_capability(self, *path: str) -> None:
        """Raise -32021 (HTTP 400) unless this request declared the capability at ``path``."""
        if not self.has_capability(*path):
            raise MissingCapability(
                f"This request requires the {'.'.join(path)} capability", dialect.nested(*path)
            )

    def start_background(
        self, fn: Callable[..., Awaitable[object]], *args: Any, name: str | None = None
    ) -> None:
        """Start ``fn(*args)`` as background work of this run, to go on after this request
        has answered (see ``Runtime.start_background``: owned, bounded, cancelled at shutdown);
        it counts against this request's principal's share (``max_background_per_principal``).

        CPU-bound work does not belong in an ``async`` tool or here: it stalls every other
        request for as long as it computes. Write such a tool as a plain ``def`` (it runs in
        a worker thread).
        """
        self.runtime.start_background(fn, *args, name=name, principal=self.principal)

    @overload
    def service(self, extension: ServiceProvider[_S]) -> _S: ...

    @overload
    def service(self, extension: str) -> Any: ...

    def service(self, extension: ServiceProvider[Any] | str) -> Any:
        """The service ``extension`` (or its id) started for this run: for an
        ``Extension[MyService]``, the ``MyService`` its ``serve`` reported started."""
        return self.runtime.service(extension)

    @property
    def lifespan(self) -> Any:
        """What the server's ``lifespan`` yielded for this run (None without one); in a
        handler of a mounted server (``Server.mount``), what that server's lifespan yielded."""
        if self._lifespan_key is None:
            return self.runtime.lifespan_state
        return self.runtime.mounted_lifespans.get(self._lifespan_key)

    # ------------------------------------------------------------------ the way back

    async def notify(self, message: dict[str, Any]) -> None:
        """Send a raw notification on this request's own stream (validated when on); a
        detached context (a task's) has no stream, and sends nothing."""
        if self._responder is None:
            await trio.lowlevel.checkpoint()
            return
        await self._server.send(self._responder, message)

    async def keepalive(self) -> None:
        """Keep this request's quiet stream open (an SSE comment over HTTP)."""
        if self._responder is None:
            await trio.lowlevel.checkpoint()
            return
        await self._responder.keepalive()

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress on this request's stream; a no-op unless it sent a progressToken.

        ``progress`` must increase from one call to the next (spec basic/patterns/progress): a
        value that does not is dropped with a warning rather than failing the request.
        """
        token = self.meta.progress_token
        if token is None:
            await trio.lowlevel.checkpoint()
            return
        if self._last_progress is not None and progress <= self._last_progress:
            logger.warning(
                "progress %s after %s dropped: it must increase", progress, self._last_progress
            )
            await trio.lowlevel.checkpoint()
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify(notification_message("notifications/progress", params))

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` if this request opted in at ``level`` or below.

        Logging is deprecated in 2026-07-28: nothing is sent unless the server declares the
        ``logging`` capability (``Server(logging=True)``; servers that log MUST declare it)
        and the request's ``_meta`` names a ``logLevel`` (wire §16).
        """
        if level not in dialect.LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        if not (self._server.logging and dialect.log_enabled(self.meta, level)):
            await trio.lowlevel.checkpoint()
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self.notify(notification_message("notifications/message", params))

    # ------------------------------------------------------------------ MRTR (wire §10)

    def can_ask(self, request: Mapping[str, Any]) -> bool:
        """True when this request's client declared what ``request`` needs (wire §10.5)."""
        return can_ask(self.meta.client_capabilities, request)

    async def input(
        self, requests: InputRequests, *, state: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The client's answers to ``requests``, however this handler is running.

        In an ordinary request, answers the retry brought are returned (each checked against
        its request's result type, -32602 if it is not one); when some are missing, this
        round ends with ``input_required`` and the client retries with them. ``state`` comes
        back on that retry, verified, as ``ctx.state``. A request the client has no
        capability for raises -32021 instead; check ``can_ask`` first to degrade gracefully.

        When the handler runs as a task, the task parks here until ``tasks/update`` delivers
        the answers. Either way, write ``answers = await ctx.input({...})``.

        Ending a round raises ``InputRequired``, a ``BaseException``: an ``except Exception``
        in your tool does not catch it, so never wrap this call in ``except BaseException``.
        """
        if self._provide is None:  # an ordinary request: the retry's answers, or the end
            return await self._round(requests, state)  # of this round
        # A task asks through tasks/get, but the rule is the same: never ask a client for
        # what it did not declare (wire §10.5). The task fails with -32021 inlined.
        check_askable(self.meta.client_capabilities, requests)
        answers = await self._provide(self, requests)
        if state is not None:  # what a retry would have brought back, verified
            self.state = state
        return answers

    async def _round(
        self, requests: InputRequests, state: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """``input`` in an ordinary request (an MRTR round, wire §10); out of ``input``'s
        frame, which a parked task holds, so that frame keeps only what a task needs."""
        await trio.lowlevel.checkpoint()
        found, missing = _split(requests, self.input_responses)
        check_responses(self._server.schemas, requests, found)
        if missing:
            check_askable(self.meta.client_capabilities, missing)
            raise InputRequired(missing, state)
        return found

    def respond_through(self, responder: Responder) -> None:
        """Send this request's notifications through ``responder`` from now on (an
        older-era session's resumable stream logs each on its way)."""
        self._responder = responder

    async def close_stream(self) -> bool:
        """Close the connection of this request's stream now, without ending the request:
        the client reconnects after the stream's ``retry`` delay with ``Last-Event-ID`` and
        gets what followed, then the answer (SEP-1699 polling). Only an older-era session's
        resumable stream can be closed so; elsewhere this does nothing and returns False."""
        responder = self._responder
        if isinstance(responder, Reconnectable):
            await responder.hang_up()
            return True
        await trio.lowlevel.checkpoint()
        return False

    def ask_with(self, provide: InputProvider) -> None:
        """Have ``provide`` answer this request's ``ctx.input`` instead of an MRTR round
        (an older-era session pushes its requests to the client)."""
        self._provide = provide

    # ------------------------------------------------------------------ detaching

    def detached(
        self, provide: InputProvider, *, meta: tuple[Any, RequestMeta] | None = None
    ) -> Context:
        """A context for work that outlives this request (a task, SEP-2663 §5.3).

        Same client facts and the same run; no way back to the request: notifications go
        nowhere, and ``input`` is answered by ``provide`` instead of an MRTR round. It keeps
        nothing of the request's responder, headers or MRTR round alive. ``meta``, when
        given, is an equal ``_meta`` and what was read from it, to keep instead of this
        request's own (many tasks of one client can share one).
        """
        params = {
            k: v for k, v in self.params.items() if k not in ("inputResponses", "requestState")
        }
        request_meta = self.meta
        if meta is not None:
            params["_meta"], request_meta = meta
        other = Context(
            self.request_id,
            self.method,
            params,
            request_meta,
            runtime=self.runtime,
            server=self._server,
            authorization=self._authorization,
        )
        other._principal = self._principal
        other._provide = provide
        other._lifespan_key = self._lifespan_key
        return other


def serve_mounted(ctx: Context, key: object) -> None:
    """Have ``ctx.lifespan`` give what the lifespan of mounted server ``key`` yielded: its
    handler is about to be called with ``ctx``."""
    ctx._lifespan_key = key
