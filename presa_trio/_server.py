"""``Server``: the facade users declare tools, resources, prompts and completions on.

It holds the declarations (a ``Registry``), the settings and the extensions, and builds the
``Dispatcher`` from them once; running it is ``open_runtime()``, which can happen any number
of times, also at once. It does no I/O itself: transports feed a runtime messages.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, final

import trio

from ._backends.opening import open_backend
from ._backends.protocol import Backend, parse_url
from ._boundary import absorb
from ._kernel.bus import SubscriptionBus
from ._kernel.composition import check_prefix, prefixed
from ._kernel.context import Context
from ._kernel.dispatcher import Dispatcher
from ._kernel.extension_hooks import Extension, ExtensionContext
from ._kernel.legacy import session_store_for, stream_log_for
from ._kernel.methods import core_routes
from ._kernel.middleware import Middleware
from ._kernel.registry import Completer, Prompt, Registry, Resource, ResourceTemplate, Tool
from ._kernel.runtime import Runtime
from ._kernel.session_signals import SessionSignals
from ._kernel.sessions import RunSessions
from ._kernel.settings import (
    DEFAULT_LIMITS,
    DEFAULT_LISTING,
    DEFAULT_REQUEST_STATE,
    DEFAULT_SESSIONS,
    DEFAULT_VALIDATION,
    Limits,
    Listing,
    OldSettings,
    RequestState,
    Served,
    Sessions,
    Settings,
    Validation,
    regroup,
)
from ._kernel.signature import Handler, Signature
from ._kernel.tracing import Tracing
from ._protocol.request_state import KeyRing, StateSealer
from ._protocol.schema import Schemas
from ._protocol.tokens import check_scopes

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ._protocol.cors import Cors
    from ._protocol.headers import HostPolicy
    from ._transports.asgi import AsgiApp
    from ._transports.timeouts import OldTimeouts, Timeouts
    from .auth import BearerAuth

F = TypeVar("F", bound=Handler)
Lifespan = Callable[["Server"], AbstractAsyncContextManager[Any]]


@asynccontextmanager
async def _no_lifespan(server: Server) -> AsyncIterator[None]:
    await trio.lowlevel.checkpoint()
    yield None


logger = logging.getLogger("presa_trio")


def _doc(fn: Handler) -> str | None:
    doc = inspect.getdoc(fn)
    return doc.strip() if doc else None


def _tracing(tracing: bool | TracerProvider) -> Tracing | None:
    if tracing is False:
        return None
    return Tracing(None if tracing is True else tracing)


def _no_bare(decorator: str, first: object) -> None:
    """``@server.tool`` without parentheses would register nothing: say so at import time."""
    if callable(first):
        raise TypeError(f"write @server.{decorator}(...) with parentheses, not @server.{decorator}")


@final
class Server:
    """An MCP 2026-07-28 server (and, by default, one for the ``initialize`` era's clients):
    declare what it serves, then run it on a transport.

    >>> server = Server("demo", version="1.0.0")
    >>> @server.tool()
    ... async def greet(name: str) -> str:
    ...     "Say hello."
    ...     return f"Hello, {name}!"

    ``principal(ctx)`` names who is asking (from your authentication): a ``requestState``
    issued to one principal is refused for another (wire §10.4), and extensions scope their
    data by it. Every resource a client can make the server hold is bounded: ``limits``
    (``presa_trio.Limits``: worker threads, listen streams, background work, and each
    principal's share of them) and ``request_state`` (``presa_trio.RequestState``: its keys,
    how long a client has to answer, its largest size). ``validation`` (``Validation``) says
    which messages are checked against the schema (requests by default; responses too with
    ``Validation(outbound=True)``, for tests); ``listing`` (``Listing``) is the caching and
    paging of list results. ``logging`` declares the ``logging`` capability.
    ``loop_warning`` logs when the event loop was blocked that many seconds (None: never).
    ``backend`` is the URL of the state shared by this server's workers: ``"memory:"`` (the
    default: this process only) or ``"sqlite:///ABSOLUTE/PATH.db"`` (every worker process
    of one host; see ``presa_trio.backends``); ``open_runtime(backend=...)`` overrides it.
    ``lifespan(server)`` is an async context manager entered by every run before anything
    is served and left after everything stopped (tasks included): open a database pool or
    an HTTP client there; what it yields is ``ctx.lifespan`` in every handler.
    ``tracing`` turns on OpenTelemetry spans (see README "Observability"): ``True`` sends
    them to the global tracer provider, or pass a ``TracerProvider``. It needs the
    ``opentelemetry-api`` package (``presa_trio[otel]``); off, it costs nothing.
    ``auth`` (a ``presa_trio.auth.BearerAuth``) makes its HTTP apps require a bearer token
    and serve their Protected Resource Metadata; the token's subject is then the default
    principal. stdio ignores it: there, credentials come from the environment.
    ``legacy`` (on by default) also serves the clients of the ``initialize`` era (revisions
    2025-06-18 and 2025-11-25) on the same endpoint and over stdio, with the same handlers;
    their sessions live in ``backend``, so every worker serves them. ``sessions``
    (``presa_trio.Sessions``) bounds them: how many, how long idle, and the requests a tool's
    ``ctx.input`` pushes to their clients. ``legacy=False`` serves 2026-07-28 only.

    The keyword arguments these groups replaced (``max_threads=``, ``validate_outbound=``,
    ``list_ttl_ms=``, ``state_keys=``...) still work, each with a ``DeprecationWarning``
    naming its place in a group.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        logging: bool = False,
        schemas: Schemas | None = None,
        principal: Callable[[Context], str] | None = None,
        loop_warning: float | None = 0.5,
        backend: str | None = None,
        lifespan: Lifespan | None = None,
        tracing: bool | TracerProvider = False,
        auth: BearerAuth | None = None,
        limits: Limits = DEFAULT_LIMITS,
        validation: Validation = DEFAULT_VALIDATION,
        listing: Listing = DEFAULT_LISTING,
        request_state: RequestState = DEFAULT_REQUEST_STATE,
        legacy: bool = True,
        sessions: Sessions = DEFAULT_SESSIONS,
        **deprecated: Unpack[OldSettings],
    ) -> None:
        if deprecated:
            groups = (limits, validation, listing, request_state)
            limits, validation, listing, request_state = regroup(groups, deprecated)
        info: dict[str, Any] = {"name": name, "version": version}
        if title is not None:
            info["title"] = title
        self.name = name
        self.settings = Settings(
            server_info=info,
            instructions=instructions,
            logging=logging,
            principal=principal,
            limits=limits,
            validation=validation,
            listing=listing,
            request_state=request_state,
            sessions=sessions if legacy else replace(sessions, enabled=False),
            loop_warning=loop_warning,
            backend=backend,
            tracing=_tracing(tracing),
        )
        self.schemas = schemas if schemas is not None else Schemas()
        self.registry = Registry()
        self._extensions: list[Extension] = []
        self._middleware: list[Middleware] = []
        served = Served(self.registry, self.settings, self._extensions, self._middleware)
        self.dispatcher = Dispatcher(
            core_routes(served),
            schemas=self.schemas,
            settings=self.settings,
            extensions=self._extensions,
            served=served,
            middleware=self._middleware,
        )
        self._runtimes: set[Runtime] = set()
        self._lifespan = lifespan
        self.auth = auth
        self._mounts: list[Server] = []  # mounted here, in order (``mount``)
        self._mounted_in: Server | None = None
        # What has been built to serve it (an app, a run): from then on nothing is mounted.
        self._built: str | None = None

    @property
    def extensions(self) -> Sequence[Extension]:
        return tuple(self._extensions)

    # ------------------------------------------------------------------ declaring

    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        thread: bool = True,
        scopes: Sequence[str] = (),
        structured_output: bool | None = None,
    ) -> Callable[[F], F]:
        """Declare a tool. The input schema comes from the type hints unless given.

        Each argument reaches ``fn`` as its parameter is hinted (a dataclass, a pydantic
        model, an ``Enum``, a ``datetime``...), converted in pydantic's lax mode (``"5"`` for
        an ``int``); one that does not convert is the tool's input error (``isError``). A
        return type that is data (``str``, ``int``, ``dict[str, int]``, a TypedDict, a
        dataclass, a model...) gets an ``outputSchema`` and ``structuredContent`` (wrapped as
        ``{"result": ...}`` when it is not an object); content (no hint, ``None``, blocks,
        ``dict[str, Any]``) gets none. ``structured_output=False`` keeps a data return as
        content only; ``True`` requires an ``outputSchema`` (TypeError at declaration when
        the hint gives none). The description defaults to the docstring. ``options`` carries
        settings that extensions read (a task policy); the core ignores them. A sync function
        runs in a worker thread; ``thread=False`` runs it on the event loop instead, for
        cheap, pure functions that never block. ``scopes`` are the OAuth scopes a call
        needs over HTTP: a token without them gets 403 ``insufficient_scope`` (see
        ``presa_trio.auth``); the tool is listed for everyone all the same.
        """
        _no_bare("tool", name)

        def register(fn: F) -> F:
            signature = Signature.of(fn)
            tool_name = name or fn.__name__
            derived, wrap = (None, False)
            if output_schema is None and structured_output is not False:
                derived, wrap = signature.output_shape()
                if derived is None and structured_output:
                    raise TypeError(
                        f"tool {tool_name!r}: its return hint {signature.returns!r} gives no"
                        " outputSchema (content is not structured output)"
                    )
            self.registry.add_tool(
                Tool(
                    name=tool_name,
                    description=description or _doc(fn) or tool_name,
                    input_schema=dict(input_schema)
                    if input_schema is not None
                    else signature.input_schema(),
                    signature=signature,
                    title=title,
                    output_schema=dict(output_schema) if output_schema is not None else derived,
                    annotations=dict(annotations) if annotations is not None else None,
                    icons=[dict(i) for i in icons] if icons is not None else None,
                    meta=dict(meta) if meta is not None else None,
                    options=dict(options or {}),
                    thread=thread,
                    scopes=check_scopes(scopes),
                    lax=input_schema is None,
                    wrap_output=wrap,
                )
            )
            return fn

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: Mapping[str, Any] | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        thread: bool = True,
    ) -> Callable[[F], F]:
        """Declare a resource at a fixed URI; its function returns str, bytes or contents.

        A URI with ``{variables}`` declares a resource template instead; the function then
        takes the variables as keyword arguments, converted to their hints (``note_id: int``).
        A URI whose variables do not convert is not this template's (resource not found, when
        no other template holds it).
        """
        _no_bare("resource", uri)

        def register(fn: F) -> F:
            entry_type = ResourceTemplate if "{" in uri else Resource
            self.registry.add_resource(
                entry_type(
                    uri=uri,
                    name=name or fn.__name__,
                    signature=Signature.of(fn),
                    title=title,
                    description=description or _doc(fn),
                    mime_type=mime_type,
                    size=size,
                    annotations=dict(annotations) if annotations is not None else None,
                    ttl_ms=ttl_ms,
                    cache_scope=cache_scope,
                    thread=thread,
                )
            )
            return fn

        return register

    def prompt(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        arguments: Sequence[Mapping[str, Any]] | None = None,
        thread: bool = True,
    ) -> Callable[[F], F]:
        """Declare a prompt; its parameters are its arguments, strings on the wire converted to
        their hints (``count: int``); one that does not convert is -32602 invalid params."""
        _no_bare("prompt", name)

        def register(fn: F) -> F:
            signature = Signature.of(fn)
            prompt_name = name or fn.__name__
            self.registry.add_prompt(
                Prompt(
                    name=prompt_name,
                    description=description or _doc(fn) or prompt_name,
                    signature=signature,
                    arguments=[dict(a) for a in arguments]
                    if arguments is not None
                    else signature.prompt_arguments(),
                    title=title,
                    thread=thread,
                )
            )
            return fn

        return register

    def completion(
        self,
        fn: object = None,
        /,
        *,
        prompt: str | None = None,
        resource: str | None = None,
        thread: bool = True,
    ) -> Callable[[F], F]:
        """Declare the completer of a prompt's or resource template's arguments.

        The function receives ``(argument_name, value, context_arguments)`` and returns an
        iterable of suggestions (the first 100 are sent).
        """
        _no_bare("completion", fn)
        if (prompt is None) == (resource is None):
            raise ValueError("give exactly one of prompt= or resource=")
        ref = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", str(resource))

        def register(fn: F) -> F:
            self.registry.add_completer(ref, Completer(fn, thread=thread))
            return fn

        return register

    def add_extension(self, extension: Extension) -> None:
        """Plug in a protocol extension (its methods, hooks, capability and service)."""
        if any(e.id == extension.id for e in self._extensions):
            raise ValueError(f"extension {extension.id!r} is already added")
        if self._runtimes:
            raise RuntimeError("add extensions before the server runs")
        for route in extension.routes():
            self.dispatcher.add(route)
        self._extensions.append(extension)

    def add_middleware(self, middleware: Middleware) -> None:
        """Wrap every request this server answers in ``middleware``, an ``async def
        middleware(ctx, call_next)`` that returns ``await call_next(ctx)`` (or another
        result) or raises an ``McpError``; the first added is the outermost. Requests of
        both eras on every transport go through it (see ``presa_trio.middleware`` and the
        middleware guide for what it sees of notifications, tasks and input rounds)."""
        if self._runtimes or self._built is not None:
            raise RuntimeError("add middleware before the server's app is built or it runs")
        if self._mounted_in is not None:
            raise RuntimeError(
                f"server {self.name!r} is mounted in {self._mounted_in.name!r}: "
                "add middleware to that server"
            )
        self._middleware.append(middleware)

    @property
    def middleware(self) -> Sequence[Middleware]:
        """The middleware every request goes through, the outermost first."""
        return tuple(self._middleware)

    # ------------------------------------------------------------------ composing

    def mount(self, server: Server, prefix: str) -> None:
        """Serve everything ``server`` declares from this server, under ``prefix``: its
        tools and prompts as ``{prefix}_{name}``, its resources and templates with
        ``prefix`` as the first segment after ``scheme://`` (``data://stations`` under
        ``weather`` is ``data://weather/stations``), its completions with them. Its
        lifespan is entered inside this server's in every run (in mount order, left in
        reverse), and its handlers' ``ctx.lifespan`` is what it yielded.

        This server's settings, auth, extensions and middleware serve them all; a mounted
        server that needs something else is refused here: an extension this server has not
        added, middleware of its own, a ``principal`` function or ``auth`` not this
        server's. So is a name or URI this server already serves, and a mount once this
        server's app is built. ``server`` can declare nothing more once mounted.
        """
        prefix = check_prefix(prefix)
        if server is self:
            raise ValueError(f"server {self.name!r} cannot be mounted in itself")
        if self._built is not None:
            raise RuntimeError(
                f"mount servers before {self._built} of server {self.name!r} is built"
            )
        if self._mounted_in is not None:
            raise RuntimeError(
                f"server {self.name!r} is mounted in {self._mounted_in.name!r}: "
                "mount into that server instead"
            )
        if server._mounted_in is not None:
            raise ValueError(
                f"server {server.name!r} is already mounted in {server._mounted_in.name!r}"
            )
        self._check_mountable(server)
        entries = prefixed(server.registry, prefix, server)
        self.registry.merge(entries, f"mounting server {server.name!r} under {prefix!r}")
        self._mounts.append(server)
        server._mounted_in = self
        server.registry.closed = (
            f"server {server.name!r} is mounted in {self.name!r}: declare everything on it "
            "before mounting it"
        )

    def _check_mountable(self, server: Server) -> None:
        """Refuse what this server cannot serve for ``server`` as ``server`` would."""
        mine = {e.id for e in self._extensions}
        missing = [e.id for e in server._extensions if e.id not in mine]
        if missing:
            raise ValueError(
                f"server {server.name!r} uses extension {', '.join(missing)}: add it to "
                f"{self.name!r} (a mounted server is served by its parent's extensions)"
            )
        if server._middleware:
            raise ValueError(
                f"server {server.name!r} has middleware of its own: add it to {self.name!r} "
                "(the parent's middleware wraps every request it serves)"
            )
        principal = server.settings.principal
        if principal is not None and principal is not self.settings.principal:
            raise ValueError(
                f"server {server.name!r} names principals with a function {self.name!r} does "
                f"not use: give that function to {self.name!r} (Server(principal=...))"
            )
        if server.auth is not None and server.auth is not self.auth:
            raise ValueError(
                f"server {server.name!r} has auth that {self.name!r} does not use: give it "
                f"to {self.name!r} (its HTTP app is the one that verifies tokens)"
            )

    def _mounted(self) -> Iterator[Server]:
        """Every server mounted here, and in those, depth first in mount order."""
        for server in self._mounts:
            yield server
            yield from server._mounted()

    @asynccontextmanager
    async def _lifespans(self) -> AsyncIterator[tuple[Any, dict[object, Any]]]:
        """This server's lifespan, then each mounted server's inside it (left in reverse):
        what this one yielded, and what each mounted one did, by server."""
        async with AsyncExitStack() as stack:
            lifespan = self._lifespan if self._lifespan is not None else _no_lifespan
            state = await stack.enter_async_context(lifespan(self))
            mounted: dict[object, Any] = {}
            for server in self._mounted():
                if server._lifespan is not None:
                    mounted[server] = await stack.enter_async_context(server._lifespan(server))
            yield state, mounted

    # ------------------------------------------------------------------ running

    @asynccontextmanager
    async def open_runtime(
        self, backend: str | Backend | None = None, state_keys: KeyRing | None = None
    ) -> AsyncIterator[Runtime]:
        """Run the server: own everything one run needs, for the lifetime of a transport.

        ``backend`` (a URL, or an open ``Backend``) overrides the server's ``backend``
        setting. Each extension's service starts here (an error before it reports started
        fails the startup). On exit the runtime drains first (listen streams end with their
        final result, no new tasks are admitted), then its background work is cancelled.
        """
        settings = self.settings
        limits, sealing = settings.limits, settings.request_state
        limiter = trio.CapacityLimiter(limits.max_threads)
        bus = SubscriptionBus(
            max_listeners=limits.max_listeners,
            max_listeners_per_principal=limits.max_listeners_per_principal,
        )
        if self._built is None:
            self._built = "a run"
        async with (
            open_backend(backend or settings.backend) as opened,
            self._lifespans() as (state, mounted),
        ):
            ring = state_keys if state_keys is not None else sealing.keys
            if ring is None and (key := await opened.shared_key()) is not None:
                ring = KeyRing([("shared", key)])
            sealer = StateSealer(ring, sealing.ttl, sealing.max_bytes)
            async with trio.open_nursery() as nursery:
                runtime = Runtime(
                    nursery,
                    sealer=sealer,
                    thread_limiter=limiter,
                    threads_per_principal=limits.max_threads_per_principal,
                    bus=bus,
                    backend=opened,
                    max_background=limits.max_background,
                    max_background_per_principal=limits.max_background_per_principal,
                    lifespan_state=state,
                    mounted_lifespans=mounted,
                )
                if settings.sessions.enabled:
                    runtime.sessions = RunSessions(
                        session_store_for(opened),
                        SessionSignals(
                            opened,
                            settings.sessions.max_pending_pushes,
                            settings.sessions.max_pending_pushes_per_principal,
                        ),
                        settings.sessions,
                        stream_log_for(opened),
                    )
                try:
                    if opened.shared:
                        await nursery.start(runtime.relay_events)
                    if runtime.sessions is not None:  # the run's own: not background work
                        nursery.start_soon(runtime.sessions.sweep, name="session sweep")
                    if settings.loop_warning is not None:
                        runtime.start_background(
                            runtime.watch_event_loop, settings.loop_warning, name="loop watch"
                        )
                    for extension in self._extensions:
                        context = ExtensionContext(
                            runtime, self.registry, self.schemas, tracing=settings.tracing
                        )
                        service = await nursery.start(_run_service, extension, context)
                        runtime.add_service(extension.id, service)
                    self._runtimes.add(runtime)
                    yield runtime
                finally:
                    self._runtimes.discard(runtime)
                    runtime.begin_draining()
                    nursery.cancel_scope.cancel()

    def asgi_app(
        self,
        *,
        path: str = "/mcp",
        max_body: int | None = None,
        host_policy: HostPolicy | None = None,
        timeouts: Timeouts | None = None,
        shutdown_timeout: float | None = None,
        cors: bool | Cors = False,
        auth: BearerAuth | None = None,
        backend: str | None = None,
        state_keys: KeyRing | None = None,
        **deprecated: Unpack[OldTimeouts],
    ) -> AsgiApp:
        """The Streamable HTTP ASGI app for this server (see ``presa_trio.AsgiApp`` for
        ``path``, ``max_body`` (None: 4 MiB), ``host_policy``, ``timeouts`` (None:
        ``Timeouts()``), ``shutdown_timeout``, ``cors`` and ``auth``); ``backend``,
        ``state_keys`` and ``auth`` override the server's settings for it.

        ``shutdown_timeout`` is process policy, off by default: a program that runs
        hypercorn itself and wants its process gone within that many seconds of the start
        of its shutdown, whatever still runs, asks for it here (``presa-trio serve`` keeps
        its own, ``--shutdown-timeout``). ``body_timeout=`` and ``write_timeout=`` still
        work, with a ``DeprecationWarning``: they are ``timeouts=Timeouts(body=, write=)``.
        """
        # An embedding that serves no HTTP never loads these.
        from ._transports.asgi import DEFAULT_MAX_BODY, AsgiApp
        from ._transports.timeouts import DEFAULT_TIMEOUTS, regroup_timeouts

        if backend is not None:
            parse_url(backend)
        self._built = "the app"
        if timeouts is None:
            timeouts = DEFAULT_TIMEOUTS
        if deprecated:
            timeouts = regroup_timeouts(timeouts, deprecated, "asgi_app")
        return AsgiApp(
            self.dispatcher,
            partial(self.open_runtime, backend, state_keys),
            path=path,
            max_body=DEFAULT_MAX_BODY if max_body is None else max_body,
            host_policy=host_policy,
            timeouts=timeouts,
            shutdown_timeout=shutdown_timeout,
            cors=cors,
            auth=auth if auth is not None else self.auth,
        )

    # ------------------------------------------------------------------ change notifications

    def notify_tools_changed(self) -> int:
        """Tell the listeners of every run that asked for it that the tool list changed."""
        return sum(r.notify_tools_changed() for r in list(self._runtimes))

    def notify_prompts_changed(self) -> int:
        return sum(r.notify_prompts_changed() for r in list(self._runtimes))

    def notify_resources_changed(self) -> int:
        return sum(r.notify_resources_changed() for r in list(self._runtimes))

    def notify_resource_updated(self, uri: str) -> int:
        """Tell the listeners subscribed to ``uri`` (or a parent of it) that it changed."""
        return sum(r.notify_resource_updated(uri) for r in list(self._runtimes))


async def _run_service(
    extension: Extension, context: ExtensionContext, *, task_status: trio.TaskStatus[Any]
) -> None:
    """An extension's service. An error before it reports started fails the startup; after,
    it is logged and ends that service only, never the run."""
    status = _Started(task_status)
    try:
        await extension.serve(context, task_status=status)
    except BaseException as exc:
        if not status.done:
            raise
        absorb(exc, f"the service of extension {extension.id}")
        await trio.lowlevel.checkpoint()


@final
class _Started:
    """The ``task_status`` handed to a service: it remembers whether startup finished."""

    __slots__ = ("_inner", "done")

    def __init__(self, inner: trio.TaskStatus[Any]) -> None:
        self._inner = inner
        self.done = False

    def started(self, value: Any = None) -> None:
        self.done = True
        self._inner.started(value)
