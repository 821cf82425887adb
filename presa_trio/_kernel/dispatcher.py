"""The dispatcher: admits a request, runs its handler, and is the ONE place errors become
responses (spec 2026-07-28 basic/index.mdx; wire §3, §10, §12).

Admission follows wire §12.3 (headers, ``_meta``, version, method, ``Mcp-Name``, params
against the schema ``$def``, required client capabilities); then the handler runs with a
``Context``. On the way out every result gets its ``resultType`` and ``serverInfo`` here, and
every error its JSON-RPC shape and HTTP status: an ``McpError`` as it is, anything else logged
and answered -32603 without detail. Transports hand over rejections they decide themselves
(``refuse``) and never build an error message. It holds no per-run state: that is the
``Runtime`` each request arrives with.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any, final

import trio

from .._boundary import protocol_error
from .._protocol import dialect, era
from .._protocol import headers as routing
from .._protocol.input_requests import InputRequired
from .._protocol.jsonrpc import (
    Notification,
    Request,
    RequestId,
    Response,
    encode,
    error_message,
    result_message,
)
from .._protocol.request_state import StateSealer, binding_digest
from .._protocol.schema import Schemas, error_definition
from ..errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    MissingCapability,
    ServiceUnavailable,
    SessionNotFound,
    SessionRequired,
    Unauthorized,
    UnsupportedVersion,
)
from .authorization import Authorization
from .context import Context, Responder, ServerView, notification_data
from .extension_hooks import Extension
from .legacy import LegacyEra
from .middleware import Middleware, run_chain
from .requestlog import CURRENT, log_answered, started
from .resumable import Reply
from .routes import Route
from .runtime import Runtime
from .settings import Served, Settings

logger = logging.getLogger("presa_trio")


@final
class Dispatcher:
    """Routes one server's requests. Built once per server from its routes, schemas, settings
    and extensions; each request brings the ``Runtime`` of the run that serves it."""

    def __init__(
        self,
        routes: Iterable[Route],
        *,
        schemas: Schemas,
        settings: Settings,
        extensions: Sequence[Extension] = (),
        served: Served | None = None,
        middleware: Sequence[Middleware] = (),
    ) -> None:
        self.schemas = schemas
        self.settings = settings
        self._extensions = extensions
        # The server's own list: middleware added later (before it runs) is seen here.
        self._middleware = middleware
        self._notification_defs = schemas.notification_definitions()
        self._view = ServerView(
            schemas, self._checked_notify, settings.principal, logging=settings.logging
        )
        # Every result's ``_meta`` starts as a copy of this (wire §3.3).
        self._stamp = {dialect.META_SERVER_INFO: settings.server_info}
        self._routes: dict[str, Route] = {}
        for route in routes:
            self.add(route)
        #: How the older era is served (None: 2026-07-28 only, ``Server(legacy=False)``).
        self.legacy = (
            LegacyEra(served, self._view)
            if served is not None and settings.sessions.enabled
            else None
        )

    @property
    def routes(self) -> Mapping[str, Route]:
        """The method table: every routed method by name."""
        return self._routes

    def add(self, route: Route) -> None:
        if route.name in self._routes:
            raise ValueError(f"method {route.name!r} is already routed")
        self._routes[route.name] = route

    # ------------------------------------------------------------------ admission

    def admit(
        self, request: Request, headers: routing.RoutingHeaders | None
    ) -> tuple[Route, dialect.RequestMeta]:
        """Run the admission ladder of wire §12.3 (steps 5-14); raise the first failure."""
        if request.method == "initialize":
            _refuse_legacy_initialize(request, headers, self.settings.supported_versions)
        header_version = None
        if headers is not None:
            header_version = routing.check_protocol_version_present(headers)
        meta = dialect.read_meta(request.params)
        if header_version is not None:
            routing.check_protocol_version_matches(header_version, meta.protocol_version)
        dialect.check_version(meta, self.settings.supported_versions)
        if self._extensions:
            self._negotiate(meta)
        if headers is not None:
            routing.check_method(headers, request.method)
        route = self._routes.get(request.method)
        if route is None or not route.available():
            raise MethodNotFound(f"Method not found: {request.method}")
        params: dict[str, Any] = request.params
        if headers is not None and route.name_param is not None:
            required = route.name_header_required
            routing.check_name(headers, params.get(route.name_param), required=required)
        if route.request_def is not None and self.settings.validation.inbound:
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id}
            message["method"], message["params"] = request.method, params
            violations = self.schemas.violations(route.request_def, message)
            if violations:
                first = violations[0]
                raise InvalidParams(
                    f"Invalid params: {first.pointer or '/'}: {first.message}",
                    {"pointer": first.pointer},
                )
        if route.requires is not None and not dialect.declares(
            meta.client_capabilities, route.requires
        ):
            raise MissingCapability("Missing required client capability", dict(route.requires))
        return route, meta

    def _negotiate(self, meta: dialect.RequestMeta) -> None:
        """Per-request extension negotiation: each declared extension checks its settings."""
        declared = meta.client_capabilities.get("extensions")
        if declared is None or not dialect.is_object(declared):  # None: the usual case
            return
        for extension in self._extensions:
            if extension.id in declared:
                extension.negotiate(declared[extension.id])

    # ------------------------------------------------------------------ serving

    async def serve(
        self,
        request: Request,
        headers: routing.RoutingHeaders | None,
        responder: Responder,
        runtime: Runtime | None,
        authorization: Authorization | None = None,
        *,
        connection: Mapping[str, Any] | None = None,
    ) -> None:
        """Answer one request through ``responder``; raises nothing but cancellation.

        ``authorization`` is how an HTTP request was authorized (None on stdio, where
        authorization does not apply). ``connection`` is what the transport knows of the
        connection, as span attributes (``network.transport`` and so on); it is read only
        when the server traces.
        """
        token = CURRENT.set((str(request.id), request.method))  # for the log records
        since = started()
        tracing = self.settings.tracing
        span = (
            None
            if tracing is None
            else tracing.request(request, connection, known=request.method in self._routes)
        )
        try:
            extra: Sequence[tuple[str, str]] = ()
            result: dict[str, Any] | None = None
            error: McpError | None = None
            try:
                if runtime is None:
                    raise ServiceUnavailable("Server is not running: its lifespan has not started")
                result = await self._run(request, headers, responder, runtime, authorization)
                data, status = self._encoded(request, result), 200
                if span is not None:
                    span.answered(result)
            except BaseException as exc:
                error = self._error_of(exc, request.method)
                if span is not None:
                    span.refused(error)
                data, status = self._error_data(request.id, error), error.http_status
                extra = error.http_headers
            await responder.finish(data, status, extra)
            if since is not None:
                shown = None if error is None else error.to_error()
                log_answered(since, request.method, request.params, status, result, shown)
        finally:
            if span is not None:
                span.end()
            CURRENT.reset(token)

    async def serve_session(
        self,
        request: Request,
        session_id: str | None,
        responder: Responder,
        runtime: Runtime | None,
        authorization: Authorization | None = None,
        *,
        new_session: str | None = None,
        headers: routing.RoutingHeaders | None = None,
    ) -> bool:
        """Answer one older-era request through ``responder``; whether it succeeded (for
        an ``initialize``: whether its session is open). Raises nothing but cancellation.
        ``new_session`` is the id an ``initialize`` opens (its answer names it in
        ``Mcp-Session-Id``). Errors are shaped here, as every other: on a session a JSON-RPC
        error is HTTP 200, and only a session that is gone answers 404."""
        token = CURRENT.set((str(request.id), request.method))
        since = started()
        tracing = self.settings.tracing
        known = request.method in self._routes or request.method == "initialize"
        span = None if tracing is None else tracing.request(request, None, known=known)
        try:
            extra: Sequence[tuple[str, str]] = ()
            succeeded = False
            answered: dict[str, Any] | None = None
            failure: McpError | None = None
            reply = Reply(responder)
            try:
                legacy = self.legacy
                if runtime is None:
                    raise ServiceUnavailable("Server is not running: its lifespan has not started")
                if legacy is None:
                    raise MethodNotFound(f"Method not found: {request.method}")
                if new_session is not None:
                    result = await legacy.initialize(
                        request, runtime, authorization, new_session, headers
                    )
                    extra = ((era.SESSION_HEADER, new_session),)
                else:
                    result = await legacy.run(
                        request,
                        session_id,
                        self._routes,
                        reply,
                        runtime,
                        authorization,
                        headers,
                    )
                data, status = self._encoded(request, result), 200
                succeeded, answered = True, result
                if span is not None:
                    span.answered(result)
            except BaseException as exc:
                error = failure = self._error_of(exc, request.method)
                if span is not None:
                    span.refused(error)
                data = self.session_error(request.id, error)
                status = self.session_status(error, opening=new_session is not None)
                extra = error.http_headers
            await reply.responder.finish(data, status, extra)
            if since is not None:
                shown = None if failure is None else failure.to_error()
                log_answered(since, request.method, request.params, status, answered, shown)
            return succeeded
        finally:
            if span is not None:
                span.end()
            CURRENT.reset(token)

    async def session_exchange(
        self,
        method: str,
        session_id: str | None,
        responder: Responder,
        runtime: Runtime | None,
        authorization: Authorization | None,
        message: Request | Notification | Response | None = None,
        headers: routing.RoutingHeaders | None = None,
        last_event_id: str | None = None,
    ) -> McpError | None:
        """Serve what an older-era session sends besides requests: a notification or an
        answer (POST), its GET stream, its end (DELETE). Returns the error to answer (shaped
        by ``refuse_session``) when there is one, None when done; raises only cancellation.
        A GET stream's error arrives before its stream starts."""
        await trio.lowlevel.checkpoint()  # every exchange yields once, whatever it finds
        try:
            legacy = self.legacy
            if runtime is None:
                raise ServiceUnavailable("Server is not running: its lifespan has not started")
            if legacy is None:
                raise MethodNotFound("Method not found: this server serves 2026-07-28 only")
            if method == "GET":
                await legacy.stream(
                    session_id, responder, runtime, authorization, headers, last_event_id
                )
            elif method == "DELETE":
                await legacy.end(session_id, runtime, authorization, headers)
            elif isinstance(message, Response):
                await legacy.answer(message, session_id, runtime, authorization, headers)
            elif isinstance(message, Notification):
                await legacy.notification(message, session_id, runtime, authorization, headers)
            return None
        except BaseException as exc:
            return self._error_of(exc, f"{method} of a session")

    async def refuse_session(
        self, error: McpError, request_id: RequestId | None, responder: Responder
    ) -> None:
        """Answer a refusal of a session's exchange (no request of it ran: the status is
        the error's own, 404 for a session that is gone), shaped as the older era codes it."""
        data = self.session_error(request_id, error)
        await responder.finish(data, error.http_status, error.http_headers)

    @staticmethod
    def session_status(error: McpError, *, opening: bool = False) -> int:
        """The HTTP status of an older-era error: 200 on a live session (the error is in
        the body), the error's own where there is no session (yet), or it is gone."""
        if opening or isinstance(
            error, SessionNotFound | SessionRequired | Unauthorized | ServiceUnavailable
        ):
            return error.http_status
        if isinstance(error, InvalidRequest) and error.http_status != 400:
            return error.http_status  # 409 and the like: about the HTTP exchange itself
        return 200

    def session_error(self, request_id: RequestId | None, error: McpError) -> bytes:
        """An older-era error response, as bytes: the older era's code where it has its
        own (resource-not-found is -32002 there)."""
        message = error_message(request_id, error)
        legacy_code = getattr(error, "legacy_code", None)
        if legacy_code is not None:
            message["error"]["code"] = legacy_code
        return encode(message)

    async def refuse(
        self, error: McpError, request_id: RequestId | None, responder: Responder
    ) -> None:
        """Answer a rejection a transport decided before dispatch (a parse error, a body too
        large, a forbidden Host): same shape, same outbound check, as every other error."""
        data = self._error_data(request_id, error)
        await responder.finish(data, error.http_status, error.http_headers)

    async def _run(
        self,
        request: Request,
        headers: routing.RoutingHeaders | None,
        responder: Responder,
        runtime: Runtime,
        authorization: Authorization | None,
    ) -> dict[str, Any]:
        route, meta = self.admit(request, headers)
        ctx = self._context(request, meta, headers, responder, runtime, authorization)
        if self._middleware:
            if route.input_required and "requestState" in request.params:
                self._resume(route, ctx, runtime.sealer)
            handle = partial(self._handle, route, request.params)
            result = await run_chain(self._middleware, ctx, handle)
        elif not route.input_required:  # without middleware, as ``_handle`` but inline: the
            result = await route.handler(ctx, request.params)  # path of every plain request
        else:
            if "requestState" in request.params:
                self._resume(route, ctx, runtime.sealer)
            try:
                result = await route.handler(ctx, request.params)
            except InputRequired as asked:
                await trio.lowlevel.checkpoint()
                result = self._input_required(route, ctx, asked, runtime.sealer)
        self._finish(result)
        self._check_result(route, result)
        return result

    async def _handle(self, route: Route, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """The method itself, the innermost link of the middleware chain (``_run`` does the
        same inline without middleware): an input round (wire §10) is a result here,
        ``input_required``, never an exception."""
        if not route.input_required:
            return await route.handler(ctx, params)
        try:
            return await route.handler(ctx, params)
        except InputRequired as asked:
            await trio.lowlevel.checkpoint()
            return self._input_required(route, ctx, asked, ctx.runtime.sealer)

    def _context(
        self,
        request: Request,
        meta: dialect.RequestMeta,
        headers: routing.RoutingHeaders | None,
        responder: Responder,
        runtime: Runtime,
        authorization: Authorization | None,
    ) -> Context:
        """The handler's view of an admitted request."""
        return Context(
            request.id,
            request.method,
            request.params,
            meta,
            runtime=runtime,
            server=self._view,
            responder=responder,
            headers=headers,
            authorization=authorization,
        )

    def _encoded(self, request: Request, result: dict[str, Any]) -> bytes:
        """The response carrying ``result``, as bytes; a result that is not JSON (``NaN``, a
        lone surrogate, an object no JSON writer knows) is a server fault, answered -32603
        like any other, never a broken response, and logged in one line: the writer's
        traceback would show only the writer."""
        try:
            return encode(result_message(request.id, result))
        except (ValueError, TypeError) as exc:  # UnicodeEncodeError is a ValueError
            logger.error("the %s result is not JSON and was dropped: %s", request.method, exc)
            raise InternalError("Internal error") from None

    def _error_data(self, request_id: RequestId | None, error: McpError) -> bytes:
        message = error_message(request_id, error)
        if self.settings.validation.outbound:
            self._check_error(message)
        return encode(message)

    def _error_of(self, exc: BaseException, method: str) -> McpError:
        """The error to answer for ``exc``; cancellation (and anything not an ``Exception``)
        is re-raised, also when it arrived in a group together with errors. An input request
        that reaches here (from a method that cannot ask, or from a child task) is a bug."""
        return protocol_error(exc, f"handling {method}", also=(InputRequired,), log=logger)

    # ------------------------------------------------------------------ results

    def _finish(self, result: dict[str, Any]) -> None:
        """Stamp a result on its way out: ``resultType`` (default ``complete``, wire §3.2)
        and ``serverInfo`` in a ``_meta`` of its own (wire §3.3)."""
        result.setdefault("resultType", dialect.COMPLETE)
        meta = result.get("_meta")
        result["_meta"] = self._stamp.copy() if meta is None else {**self._stamp, **meta}

    def _binding(self, route: Route, ctx: Context) -> str:
        """What a round's ``requestState`` is bound to: method, name/uri, arguments, principal."""
        name = ctx.params.get(route.name_param) if route.name_param else None
        arguments = ctx.params.get("arguments") or {}  # absent and {} are the same call
        return binding_digest(route.name, name, arguments, ctx.principal)

    def _resume(self, route: Route, ctx: Context, sealer: StateSealer) -> None:
        """Verify a retry's ``requestState`` onto ``ctx`` (-32602 if it does not verify)."""
        token = ctx.params["requestState"]
        unsealed = sealer.unseal(token, binding=self._binding(route, ctx), now=time.time())
        ctx.state, ctx.round = unsealed.data, unsealed.round

    def _input_required(
        self, route: Route, ctx: Context, asked: InputRequired, sealer: StateSealer
    ) -> dict[str, Any]:
        result: dict[str, Any] = {"resultType": dialect.INPUT_REQUIRED}
        if asked.requests:
            result["inputRequests"] = asked.requests
        result["requestState"] = sealer.seal(
            asked.state, binding=self._binding(route, ctx), round=ctx.round + 1, now=time.time()
        )
        return result

    # ------------------------------------------------------------------ outbound checks

    async def _checked_notify(self, responder: Responder, message: dict[str, Any]) -> None:
        """How a handler's notifications reach its request's responder (``ctx.notify``):
        checked (when outbound validation is on) and encoded; one that is not JSON fails
        the request with -32603."""
        check = self.settings.validation.outbound
        data = notification_data(self.schemas, self._notification_defs, message, check=check)
        await responder.notify(data)

    def _check_result(self, route: Route, result: Mapping[str, Any]) -> None:
        if not self.settings.validation.outbound:
            return
        result_type = result.get("resultType")
        if result_type == dialect.INPUT_REQUIRED:
            definition = "InputRequiredResult"
        elif result_type == dialect.COMPLETE and route.result_def is not None:
            definition = route.result_def
        else:
            definition = "Result"
        violations = self.schemas.violations(definition, result)
        if violations:
            logger.error("invalid %s result dropped: %s", route.name, violations)
            raise InternalError("Server produced an invalid result")

    def _check_error(self, message: dict[str, Any]) -> None:
        definition = error_definition(message["error"]["code"])
        violations = self.schemas.violations(definition, message)
        if violations:  # our own bug: say so loudly, still answer
            logger.error("invalid error response: %s", violations)


def _refuse_legacy_initialize(
    request: Request, headers: routing.RoutingHeaders | None, supported: tuple[str, ...]
) -> None:
    """An older client's ``initialize`` learns which versions this server speaks (spec
    basic/versioning.mdx): legacy traffic is a request without 2026-07-28 ``_meta`` whose
    version header, if any, names another version (wire §12.3 step 5). An ``initialize`` in
    the new dialect is simply an unknown method (-32601)."""
    params = request.params if isinstance(request.params, dict) else {}
    meta = params.get("_meta")
    if isinstance(meta, dict) and dialect.META_PROTOCOL_VERSION in meta:
        return
    header = headers.get(routing.PROTOCOL_VERSION_HEADER) if headers is not None else None
    if header in supported:
        return
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        requested = header if isinstance(header, str) else "unknown"
    raise UnsupportedVersion(requested, list(supported))
