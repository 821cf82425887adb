"""The older era's requests (``initialize`` sessions, 2025-06-18 and 2025-11-25), served by
the same handlers as 2026-07-28 ones.

A session's request is admitted against its session (found in the run's store, bound to its
principal) and against its version's schema, then runs the route the 2026-07-28 dialect
would, with a ``RequestMeta`` made from the session. Its result is written down to that
version (``era.project_result``). What only the older era has lives here too: ``initialize``,
``ping``, ``logging/setLevel``, ``resources/subscribe``/``unsubscribe``, the client's
notifications and answers, the GET stream and ``DELETE``. A tool's ``ctx.input`` on a session
is a request pushed to the client on the POST's stream; its answer may reach any worker.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any, cast, final

import trio

from .._backends.protocol import Backend
from .._protocol import dialect, era
from .._protocol.headers import RoutingHeaders
from .._protocol.input_requests import RESPONSE_DEFINITIONS
from .._protocol.jsonrpc import Notification, Request, Response, encode, notification_message
from .._protocol.schema import Schemas, load_document
from ..errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    MissingCapability,
    RequestCancelled,
    SessionConflict,
    SessionNotFound,
    SessionRequired,
    StreamNotHeld,
)
from .authorization import Authorization
from .bus import EVERY_RESOURCE, BusEvent, covers
from .context import Context, InputRequests, Responder, ServerView, notification_data
from .middleware import Next, run_chain
from .resumable import EventTransport, Reply, open_stream, resumable, resume
from .routes import Route
from .runtime import Runtime
from .sessions import (
    MemorySessionStore,
    RunSessions,
    SessionRecord,
    SessionStore,
    due_for_renewal,
    now_ms,
)
from .settings import Served
from .stream_log import MemoryStreamLog, StreamLog

logger = logging.getLogger("presa_trio")

KEEPALIVE_SECONDS = 15.0
#: A GET stream's claim on its session lasts this long past its last keepalive: a worker
#: that died holding one blocks a new GET for at most this long.
STREAM_CLAIM_SECONDS = 3 * KEEPALIVE_SECONDS
SESSION_CHANGES = "presa/sessionChanges"  # the bus key a session's GET stream watches (no
# listen filter can ask it)
_LIST_FLAGS = (
    ("toolsListChanged", "tools"),
    ("promptsListChanged", "prompts"),
    ("resourcesListChanged", "resources"),
)


def _subscribed(record: SessionRecord, uri: str | None) -> bool:
    """Whether ``record`` subscribes to ``uri``, or to a parent of it."""
    return uri is not None and any(covers(watched, uri) for watched in record.subscriptions)


#: Methods only the older era has, answered here rather than by a route.
_OWN = frozenset({"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
#: Routes that belong to the 2026-07-28 dialect alone.
_MODERN_ONLY = frozenset({"server/discover", "subscriptions/listen"})


def session_store_for(backend: Backend) -> SessionStore:
    """The session store of a run on ``backend``: its database when it has one (loaded only
    then: a one-process server never imports the SQL backends)."""
    if backend.shared:
        from .sql_sessions import session_store_on

        found = session_store_on(backend)
        if found is not None:
            return found
    return MemorySessionStore()


def stream_log_for(backend: Backend) -> StreamLog:
    """The resumable streams' log of a run on ``backend``: its database when it has one."""
    if backend.shared:
        from .sql_stream_log import stream_log_on

        found = stream_log_on(backend)
        if found is not None:
            return found
    return MemoryStreamLog()


def session_changed(session_id: str) -> BusEvent:
    """What tells a session's GET stream, wherever it is held, to read its session again."""
    return BusEvent("presa/session", {}, SESSION_CHANGES, session_id)


@final
class LegacyEra:
    """How one server serves the older era (built with its dispatcher)."""

    def __init__(self, served: Served, view: ServerView) -> None:
        self._served = served
        self._view = view
        self._schemas: dict[str, Schemas] = {}
        self._defs: dict[str, dict[str, str]] = {}
        self._views: dict[str, ServerView] = {}  # a version's: its schema checks notifications
        self._extension_routes: dict[str, dict[str, Route]] = {}  # a version's (session_routes)

    def schemas(self, version: str) -> Schemas:
        """The vendored schema of ``version`` (loaded on first use)."""
        found = self._schemas.get(version)
        if found is None:
            found = self._schemas[version] = Schemas(load_document(version))
            self._defs[version] = found.request_definitions()
            notifications = found.notification_definitions()
            send = partial(self._send, found, notifications)
            self._views[version] = replace(self._view, schemas=found, send=send)
        return found

    async def _send(
        self,
        schemas: Schemas,
        definitions: Mapping[str, str],
        responder: Responder,
        message: dict[str, Any],
    ) -> None:
        """How a session's notifications reach its responder: checked against its version's
        schema (when outbound validation is on) and encoded."""
        check = self._served.settings.validation.outbound
        await responder.notify(notification_data(schemas, definitions, message, check=check))

    def _view_of(self, version: str) -> ServerView:
        """What the contexts of ``version``'s sessions share: its schema checks their
        notifications."""
        self.schemas(version)
        return self._views[version]

    def _routes_of(self, version: str, routes: Mapping[str, Route]) -> Mapping[str, Route]:
        """The routes a session of ``version`` is served by: the extensions' session routes
        of that version before the others."""
        own = self._extension_routes.get(version)
        if own is None:
            own = self._extension_routes[version] = {
                route.name: route
                for extension in self._served.extensions
                for route in extension.session_routes(version)
            }
        return {**routes, **own} if own else routes

    def _request_def(self, version: str, method: str) -> str | None:
        self.schemas(version)
        return self._defs[version].get(method)

    def _context(
        self,
        request_id: Any,
        method: str,
        params: Mapping[str, Any],
        meta: dialect.RequestMeta,
        runtime: Runtime,
        responder: Responder | None,
        authorization: Authorization | None,
        headers: RoutingHeaders | None,
    ) -> Context:
        return Context(
            request_id,
            method,
            params,
            meta,
            runtime=runtime,
            server=self._view_of(meta.protocol_version),
            responder=responder,
            headers=headers,
            authorization=authorization,
        )

    def _sessions(self, runtime: Runtime) -> RunSessions:
        sessions = runtime.sessions
        if sessions is None:
            raise MethodNotFound("Method not found: initialize (this server serves 2026-07-28)")
        return sessions

    # ------------------------------------------------------------------ opening

    async def initialize(
        self,
        request: Request,
        runtime: Runtime,
        authorization: Authorization | None,
        session_id: str,
        headers: RoutingHeaders | None = None,
    ) -> dict[str, Any]:
        """Open session ``session_id`` for this client; the ``InitializeResult``."""
        sessions = self._sessions(runtime)
        params = request.params if isinstance(request.params, dict) else None
        if params is None:
            raise InvalidParams("Invalid params: initialize needs params")
        version = era.negotiate(params.get("protocolVersion"))
        violations = self.schemas(version).violations(
            "InitializeRequest",
            {"jsonrpc": "2.0", "id": request.id, "method": "initialize", "params": params},
        )
        if violations and self._served.settings.validation.inbound:
            first = violations[0]
            raise InvalidParams(f"Invalid params: {first.pointer or '/'}: {first.message}")
        capabilities = params.get("capabilities")
        info = params.get("clientInfo")
        meta = era.legacy_meta(
            version,
            capabilities if isinstance(capabilities, dict) else {},
            info if isinstance(info, dict) else None,
            None,
            None,
        )
        ctx = self._context(
            request.id, "initialize", params, meta, runtime, None, authorization, headers
        )
        opening = partial(self._open, sessions, session_id, version)
        return await self._through_middleware(ctx, opening)

    async def _through_middleware(self, ctx: Context, innermost: Next) -> dict[str, Any]:
        """``innermost(ctx)``, through the server's middleware when it has some."""
        middleware = self._served.middleware
        if middleware:
            return await run_chain(middleware, ctx, innermost)
        return await innermost(ctx)

    async def _open(
        self, sessions: RunSessions, session_id: str, version: str, ctx: Context
    ) -> dict[str, Any]:
        """Store the session an ``initialize`` opens; the ``InitializeResult``."""
        meta = ctx.meta
        now = now_ms()
        record = SessionRecord(
            session_id=session_id,
            principal=ctx.principal,
            version=version,
            capabilities=meta.client_capabilities,
            client_info=meta.client_info,
            expires_ms=now + int(sessions.settings.idle_ttl * 1000),
        )
        await sessions.store.create(record, sessions.limits)
        settings = self._served.settings
        caps = era.server_capabilities(self._served.capabilities(), logging=settings.logging)
        for extension in self._served.extensions:
            caps.update(extension.session_capabilities(ctx))
        return era.initialize_result(version, caps, settings.server_info, settings.instructions)

    # ------------------------------------------------------------------ finding

    async def find(
        self,
        session_id: str | None,
        runtime: Runtime,
        authorization: Authorization | None,
        request_id: Any = None,
        method: str = "",
        params: Mapping[str, Any] | None = None,
        responder: Responder | None = None,
        headers: RoutingHeaders | None = None,
    ) -> tuple[SessionRecord, Context]:
        """The live session ``session_id`` of this request's principal, and the request's
        context on it; ``SessionNotFound`` (404) for any other, and 400 without an id."""
        sessions = self._sessions(runtime)
        if session_id is None:
            raise SessionRequired()
        if not era.valid_session_id(session_id):
            raise SessionNotFound()
        record = await sessions.store.get(session_id)
        if record is None:
            raise SessionNotFound()
        meta = era.legacy_meta(
            record.version,
            record.capabilities,
            record.client_info,
            record.log_level or dialect.LOG_LEVELS[0],
            params,
        )
        ctx = self._context(
            request_id, method, params or {}, meta, runtime, responder, authorization, headers
        )
        if ctx.principal != record.principal:  # indistinguishable from an unknown session
            raise SessionNotFound()
        now, ttl = now_ms(), int(sessions.settings.idle_ttl * 1000)
        if due_for_renewal(record, ttl, now):
            changed = await sessions.store.change(
                session_id, lambda r: replace(r, expires_ms=now + ttl)
            )
            record = changed if changed is not None else record
        ctx.session = record
        return record, ctx

    # ------------------------------------------------------------------ requests

    async def run(
        self,
        request: Request,
        session_id: str | None,
        routes: Mapping[str, Route],
        reply: Reply,
        runtime: Runtime,
        authorization: Authorization | None,
        headers: RoutingHeaders | None = None,
    ) -> dict[str, Any]:
        """Serve one request of a session; its result, written for the session's version.
        A request whose stream can be resumed answers through that stream (``reply``)."""
        responder = reply.responder
        params = request.params if request.params is not None else {}
        record, ctx = await self.find(  # the session first: junk params of a gone one are 404
            session_id,
            runtime,
            authorization,
            request.id,
            request.method,
            params if isinstance(params, dict) else None,
            responder,
            headers,
        )
        if not isinstance(params, dict):
            raise InvalidParams("Invalid params: params must be an object")
        if request.method == "initialize":
            raise InvalidRequest("Invalid request: this session is already initialized")
        schemas = self.schemas(record.version)
        definition = self._request_def(record.version, request.method)
        route = self._routes_of(record.version, routes).get(request.method)
        own = request.method in _OWN
        if definition is None or not (own or (route is not None and route.available())):
            raise MethodNotFound(f"Method not found: {request.method}")
        if request.method in _MODERN_ONLY:
            raise MethodNotFound(f"Method not found: {request.method}")
        if self._served.settings.validation.inbound:
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id}
            message["method"], message["params"] = request.method, params
            violations = schemas.violations(definition, message)
            if violations:
                first = violations[0]
                raise InvalidParams(
                    f"Invalid params: {first.pointer or '/'}: {first.message}",
                    {"pointer": first.pointer},
                )
        if own:
            answer = partial(self._own, request.method, params, record, runtime)
            return await self._through_middleware(ctx, answer)
        assert route is not None
        if route.requires is not None and not dialect.declares(record.capabilities, route.requires):
            raise MissingCapability("Missing required client capability", dict(route.requires))
        sessions = self._sessions(runtime)
        transport = resumable(sessions, record, request.method, responder)
        if transport is not None and "task" not in params:  # a task's creation answers at once
            logged = await open_stream(transport, sessions, record, request.id, runtime)
            if logged is not None:
                reply.responder = responder = logged
                ctx.respond_through(logged)
        ctx.ask_with(_Pushes(self, record, responder, sessions))
        handle = partial(self._handle, route, params, record.session_id, request.id)
        result = await self._through_middleware(ctx, handle)
        if request.method == "tools/list":
            self._extension_tool_fields(result, ctx)
            self._expressible_tools(result, schemas, record.version)
        result = era.project_result(result)
        if self._served.settings.validation.outbound and route.result_def is not None:
            definition = era.result_definition(route.result_def, params, result)
            if definition in schemas.definitions:
                violations = schemas.violations(definition, result)
                if violations:
                    logger.error("invalid %s result dropped: %s", route.name, violations)
                    raise InternalError("Server produced an invalid result")
        return result

    async def _handle(
        self,
        route: Route,
        params: dict[str, Any],
        session_id: str,
        request_id: Any,
        ctx: Context,
    ) -> dict[str, Any]:
        """The method itself, cancellable by the session's ``notifications/cancelled`` from
        any worker (then -32800): the innermost link of the middleware chain."""
        sessions, runtime = self._sessions(ctx.runtime), ctx.runtime
        with (
            sessions.signals.running(session_id, request_id) as scope,
            runtime.backend.attention(),
        ):
            result = await route.handler(ctx, params)
        if scope.cancelled_caught:
            raise RequestCancelled()
        return result

    def _extension_tool_fields(self, result: dict[str, Any], ctx: Context) -> None:
        """Add to each listed tool what the extensions say of it on this session."""
        tools, registered = result.get("tools"), self._served.registry.tools
        if not isinstance(tools, list) or not self._served.extensions:
            return
        for index, listed in enumerate(tools):
            tool = registered.get(listed.get("name"))
            if tool is None:
                continue
            added: dict[str, Any] = {}
            for extension in self._served.extensions:
                added.update(extension.session_tool(ctx, tool))
            if added:  # a copy: the listed dict is the registry's, shared by every list
                tools[index] = {**listed, **added}

    def _expressible_tools(self, result: dict[str, Any], schemas: Schemas, version: str) -> None:
        """Leave out of a ``tools/list`` the tools this version's ``Tool`` cannot describe."""
        tools = result.get("tools")
        if not isinstance(tools, list):
            return
        kept = []
        for tool in tools:
            violations = schemas.violations("Tool", tool)
            if violations:
                logger.info(
                    "tool %r left out of a %s tools/list: %s", tool.get("name"), version,
                    violations[0],
                )  # fmt: skip
            else:
                kept.append(tool)
        result["tools"] = kept

    async def _own(
        self,
        method: str,
        params: dict[str, Any],
        record: SessionRecord,
        runtime: Runtime,
        ctx: Context,
    ) -> dict[str, Any]:
        """The methods only the older era has."""
        sessions = self._sessions(runtime)
        if method == "ping":
            await trio.lowlevel.checkpoint()
            return {}
        if method == "logging/setLevel":
            level = params["level"]
            await sessions.store.change(record.session_id, lambda r: replace(r, log_level=level))
            return {}
        uri = params["uri"]
        subscribing = method == "resources/subscribe"
        if subscribing and "resources" not in self._served.capabilities():
            raise MethodNotFound("Method not found: resources/subscribe")

        def change(r: SessionRecord) -> SessionRecord:
            if subscribing:
                return replace(r, subscriptions=r.subscriptions | {uri})
            return replace(r, subscriptions=r.subscriptions - {uri})

        await sessions.store.change(record.session_id, change)
        runtime.publish(session_changed(record.session_id))
        return {}

    # ------------------------------------------------------------------ the client's messages

    async def notification(
        self,
        notification: Notification,
        session_id: str | None,
        runtime: Runtime,
        authorization: Authorization | None,
        headers: RoutingHeaders | None = None,
    ) -> None:
        """Act on a session's notification: ``notifications/cancelled`` cancels the request
        it names on whichever worker runs it; the others need nothing."""
        record, _ = await self.find(session_id, runtime, authorization, headers=headers)
        if notification.method == "notifications/cancelled":
            params = notification.params
            request_id = params.get("requestId") if isinstance(params, dict) else None
            if isinstance(request_id, int | str):
                await self._sessions(runtime).signals.cancel(record.session_id, request_id)

    async def answer(
        self,
        response: Response,
        session_id: str | None,
        runtime: Runtime,
        authorization: Authorization | None,
        headers: RoutingHeaders | None = None,
    ) -> None:
        """Hand the client's answer to the pushed request it answers, wherever it waits."""
        record, _ = await self.find(session_id, runtime, authorization, headers=headers)
        await self._sessions(runtime).signals.answer(record.session_id, response)

    # ------------------------------------------------------------------ GET and DELETE

    async def end(
        self,
        session_id: str | None,
        runtime: Runtime,
        authorization: Authorization | None,
        headers: RoutingHeaders | None = None,
    ) -> None:
        """``DELETE``: end the session on every worker (its GET stream closes)."""
        record, _ = await self.find(session_id, runtime, authorization, headers=headers)
        sessions = self._sessions(runtime)
        if not await sessions.store.delete(record.session_id):
            raise SessionNotFound()
        runtime.publish(session_changed(record.session_id))
        await sessions.streams.delete_session(record.session_id)

    async def stream(
        self,
        session_id: str | None,
        responder: Responder,
        runtime: Runtime,
        authorization: Authorization | None,
        headers: RoutingHeaders | None = None,
        last_event_id: str | None = None,
    ) -> None:
        """The session's GET stream: list changes and updates of subscribed resources, from
        any worker, with a keepalive after each quiet spell, until the session ends, the
        client goes or the run drains. One per session (409 for a second). With
        ``last_event_id``, the resumption of the request stream it names instead."""
        record, ctx = await self.find(
            session_id, runtime, authorization, responder=responder, headers=headers
        )
        sessions = self._sessions(runtime)
        if last_event_id is not None:
            if not getattr(responder, "carries_resumable_streams", False):
                raise StreamNotHeld()
            await resume(cast(EventTransport, responder), sessions, record, last_event_id, runtime)
            return
        holder = f"{runtime.backend.worker_id}:{time.monotonic_ns()}"
        if not await self._claim(sessions, record.session_id, holder):
            raise SessionConflict("Conflict: this session already has a GET stream")
        try:
            with runtime.backend.attention():
                await self._relay(record, ctx, runtime, sessions, holder)
        finally:

            def let_go(r: SessionRecord) -> SessionRecord:
                return replace(r, stream_holder=None) if r.stream_holder == holder else r

            # The claim is let go even when the stream was cancelled; if the store fails (or
            # takes 5 s), the claim lapses by itself.
            with contextlib.suppress(McpError), trio.CancelScope(shield=True) as release:
                release.deadline = trio.current_time() + 5.0
                await sessions.store.change(record.session_id, let_go)

    async def _claim(self, sessions: RunSessions, session_id: str, holder: str) -> bool:
        now = now_ms()
        until = now + int(STREAM_CLAIM_SECONDS * 1000)
        claimed = False

        def claim(r: SessionRecord) -> SessionRecord:
            nonlocal claimed
            if r.stream_held(now) and r.stream_holder != holder:
                return r
            claimed = True
            return replace(r, stream_holder=holder, stream_until_ms=until)

        found = await sessions.store.change(session_id, claim)
        if found is None:
            raise SessionNotFound()
        return claimed

    async def _relay(
        self,
        record: SessionRecord,
        ctx: Context,
        runtime: Runtime,
        sessions: RunSessions,
        holder: str,
    ) -> None:
        """Pass the session's events on until it ends, its claim lapses, the client goes or
        the run drains. It hears every resource update and decides by the session's
        subscriptions: those it knows, and, for an update they do not cover, those in the
        store (a subscription made on another worker may be newer than the news of it)."""
        caps = self._served.capabilities()
        agreed: dict[str, Any] = {SESSION_CHANGES: [record.session_id]}
        for flag, kind in _LIST_FLAGS:
            if kind in caps:
                agreed[flag] = True
        if "resources" in caps:
            agreed[EVERY_RESOURCE] = True
        listener_id = f"GET {record.session_id}"
        async with runtime.bus.listen(listener_id, agreed, ctx.principal) as listener:
            # Its place among the listen streams taken (503 past the bound, before any byte
            # of the answer), the response starts: the client is listening.
            await ctx.keepalive()
            try:
                while True:
                    with trio.move_on_after(KEEPALIVE_SECONDS) as quiet:
                        event = await listener.receive()
                    if quiet.cancelled_caught:
                        await ctx.keepalive()
                        if not await self._renew_claim(sessions, record.session_id, holder):
                            return
                        continue
                    if event.key == SESSION_CHANGES or (
                        event.value is not None and not _subscribed(record, event.value)
                    ):
                        found = await sessions.store.get(record.session_id)
                        if found is None or found.stream_holder != holder:
                            return  # ended (DELETE, expiry), or another holds it now
                        record = found
                        if event.key == SESSION_CHANGES or not _subscribed(record, event.value):
                            continue
                    params = dict(event.params)
                    await ctx.notify(notification_message(event.method, params or None))
            except trio.EndOfChannel:  # the run drains, or the stream fell behind
                await trio.lowlevel.checkpoint()

    async def _renew_claim(self, sessions: RunSessions, session_id: str, holder: str) -> bool:
        """Renew the stream's claim, and the session with it: a client listening on its GET
        stream is not idle. Whether the claim is still this stream's."""
        now = now_ms()
        until = now + int(STREAM_CLAIM_SECONDS * 1000)
        expires = now + int(sessions.settings.idle_ttl * 1000)
        held = False

        def renew(r: SessionRecord) -> SessionRecord:
            nonlocal held
            if r.stream_holder != holder:
                return r
            held = True
            return replace(r, stream_until_ms=until, expires_ms=max(r.expires_ms, expires))

        return await sessions.store.change(session_id, renew) is not None and held


@final
class _Pushes:
    """``ctx.input`` on a session: each input request pushed to the client on the request's
    stream, and its answer awaited (``push_timeout``), checked like an MRTR answer."""

    def __init__(
        self, era_: LegacyEra, record: SessionRecord, responder: Responder, sessions: RunSessions
    ) -> None:
        self._era = era_
        self._record = record
        self._responder = responder
        self._sessions = sessions

    async def __call__(self, ctx: Context, requests: InputRequests) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        answers: dict[str, Any] = {}
        for key, request in requests.items():
            answers[key] = await self._ask(key, request)
        return answers

    async def _ask(self, key: str, request: Mapping[str, Any]) -> Any:
        record = self._record
        schemas = self._era.schemas(record.version)
        method = str(request.get("method"))
        message = {
            "jsonrpc": "2.0",
            "id": "",
            "method": method,
            "params": dict(request.get("params") or {}),
        }
        definition = _PUSH_DEFINITIONS.get(method)
        if definition is None or definition not in schemas.definitions:
            raise InternalError(f"{method} cannot be sent to a {record.version} client")
        signals, timeout = self._sessions.signals, self._sessions.settings.push_timeout
        with signals.push(record.session_id, record.principal) as (push_id, answers):
            message["id"] = push_id
            violations = schemas.violations(definition, message)
            if violations:
                raise InternalError(
                    f"This {method} cannot be expressed in protocol {record.version}: "
                    f"{violations[0]}",
                    {"version": record.version},
                )
            await self._responder.notify(encode(message))
            with trio.move_on_after(timeout) as late:
                response = await answers.receive()
            if late.cancelled_caught:
                cancelled = {"requestId": push_id, "reason": f"not answered within {timeout:g} s"}
                await self._responder.notify(
                    encode(notification_message("notifications/cancelled", cancelled))
                )
                raise InternalError(f"The client did not answer {method} within {timeout:g} s")
        if response.error is not None:
            error = response.error
            raise InternalError(
                f"The client answered {method} with an error: {error.get('message')}",
                {"clientError": error},
            )
        answer_def = RESPONSE_DEFINITIONS[method]
        violations = schemas.violations(answer_def, response.result)
        if violations:  # the check an MRTR answer gets, named for what was asked
            raise InvalidParams(
                f"The client's answer to {method} is not a valid {answer_def}: {violations[0]}"
            )
        return response.result


_PUSH_DEFINITIONS = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "roots/list": "ListRootsRequest",
}
assert set(_PUSH_DEFINITIONS) == set(RESPONSE_DEFINITIONS)
