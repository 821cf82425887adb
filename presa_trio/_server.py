"""``Server``: the facade users declare tools, resources, prompts and completions on.

It holds the declarations (a ``Registry``), the settings and the extensions, and builds the
``Dispatcher`` from them once; running it is ``open_runtime()``, which can happen any number
of times, also at once. It does no I/O itself: transports feed a runtime messages.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, final

import trio

from ._backends.opening import open_backend
from ._backends.protocol import Backend, parse_url
from ._boundary import absorb
from ._kernel.bus import SubscriptionBus
from ._kernel.context import Context
from ._kernel.dispatcher import Dispatcher
from ._kernel.extension_hooks import Extension, ExtensionContext
from ._kernel.methods import core_routes
from ._kernel.registry import Completer, Prompt, Registry, Resource, ResourceTemplate, Tool
from ._kernel.runtime import Runtime
from ._kernel.settings import (
    DEFAULT_MAX_BACKGROUND,
    DEFAULT_MAX_BACKGROUND_PER_PRINCIPAL,
    DEFAULT_MAX_LISTENERS,
    DEFAULT_MAX_LISTENERS_PER_PRINCIPAL,
    DEFAULT_MAX_THREADS,
    DEFAULT_MAX_THREADS_PER_PRINCIPAL,
    Served,
    Settings,
)
from ._kernel.signature import Handler, Signature
from ._kernel.tracing import Tracing
from ._protocol.request_state import (
    DEFAULT_MAX_STATE_BYTES,
    DEFAULT_TTL_SECONDS,
    KeyRing,
    StateSealer,
)
from ._protocol.schema import Schemas
from ._protocol.tokens import check_scopes

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ._transports.asgi import AsgiApp
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
    """An MCP 2026-07-28 server: declare what it serves, then run it on a transport.

    >>> server = Server("demo", version="1.0.0")
    >>> @server.tool()
    ... async def greet(name: str) -> str:
    ...     "Say hello."
    ...     return f"Hello, {name}!"

    ``principal(ctx)`` names who is asking (from your authentication): a ``requestState``
    issued to one principal is refused for another (wire §10.4), and extensions scope their
    data by it. Every resource a client can make the server hold is bounded: ``max_threads``
    (worker threads for sync handlers), ``max_listeners`` (open listen streams),
    ``max_background`` (``ctx.start_background`` work), ``max_state_bytes`` (a sealed
    ``requestState``). Past the listen or the background bound the answer is a retryable
    -32603 (HTTP 503) naming it in ``data.limit``; a sync call waits for a thread instead.
    The first three are counted in each worker, so one principal (``ctx.principal``) may
    hold only a share of each, and the rest stays for the others (None: no share; README
    "Limits and deadlines" says why the other bounds need none):

    ======================================  =====  ==========================================
    Share of one principal, in one worker   Of     Past it
    ======================================  =====  ==========================================
    ``max_listeners_per_principal=100``     1,000  503, ``max_listen_streams_per_principal``
    ``max_background_per_principal=100``    1,000  503, ``max_background_tasks_per_principal``
    ``max_threads_per_principal=20``        40     its sync calls wait for its own threads
    ======================================  =====  ==========================================

    A call abandoned in its thread keeps its place in the share until its function returns.
    The anonymous principal "" (no ``principal`` function and no ``auth``: a server that
    cannot tell its clients apart) holds no share; only the bounds apply to it.
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
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        validate_inbound: bool = True,
        validate_outbound: bool = False,
        list_ttl_ms: int = 60_000,
        cache_scope: str = "public",
        page_size: int | None = None,
        logging: bool = False,
        schemas: Schemas | None = None,
        state_keys: KeyRing | None = None,
        state_ttl: float = DEFAULT_TTL_SECONDS,
        principal: Callable[[Context], str] | None = None,
        max_threads: int = DEFAULT_MAX_THREADS,
        max_threads_per_principal: int | None = DEFAULT_MAX_THREADS_PER_PRINCIPAL,
        max_listeners: int | None = DEFAULT_MAX_LISTENERS,
        max_listeners_per_principal: int | None = DEFAULT_MAX_LISTENERS_PER_PRINCIPAL,
        max_background: int = DEFAULT_MAX_BACKGROUND,
        max_background_per_principal: int | None = DEFAULT_MAX_BACKGROUND_PER_PRINCIPAL,
        max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
        loop_warning: float | None = 0.5,
        backend: str | None = None,
        lifespan: Lifespan | None = None,
        tracing: bool | TracerProvider = False,
        auth: BearerAuth | None = None,
    ) -> None:
        info: dict[str, Any] = {"name": name, "version": version}
        if title is not None:
            info["title"] = title
        self.name = name
        self.settings = Settings(
            server_info=info,
            instructions=instructions,
            validate_inbound=validate_inbound,
            validate_outbound=validate_outbound,
            list_ttl_ms=list_ttl_ms,
            cache_scope=cache_scope,
            page_size=page_size,
            logging=logging,
            principal=principal,
            state_keys=state_keys,
            state_ttl=state_ttl,
            max_state_bytes=max_state_bytes,
            max_threads=max_threads,
            max_threads_per_principal=max_threads_per_principal,
            max_listeners=max_listeners,
            max_listeners_per_principal=max_listeners_per_principal,
            max_background=max_background,
            max_background_per_principal=max_background_per_principal,
            loop_warning=loop_warning,
            backend=backend,
            tracing=_tracing(tracing),
        )
        self.schemas = schemas if schemas is not None else Schemas()
        self.registry = Registry()
        self._extensions: list[Extension] = []
        served = Served(self.registry, self.settings, self._extensions)
        self.dispatcher = Dispatcher(
            core_routes(served),
            schemas=self.schemas,
            settings=self.settings,
            extensions=self._extensions,
        )
        self._runtimes: set[Runtime] = set()
        self._lifespan = lifespan
        self.auth = auth

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
    ) -> Callable[[F], F]:
        """Declare a tool. The input schema comes from the type hints unless given.

        Each argument reaches ``fn`` as its parameter is hinted (a dataclass, a pydantic
        model, an ``Enum``, a ``datetime``...), converted in pydantic's lax mode (``"5"`` for
        an ``int``); one that does not convert is the tool's input error (``isError``). A
        return type that is data gets an ``outputSchema`` and ``structuredContent`` (wrapped
        as ``{"result": ...}`` when it is not an object); ``str`` and ``dict`` stay content.
        The description defaults to the docstring. ``options`` carries settings that
        extensions read (for example a task policy); the core ignores them. A sync function
        runs in a worker thread; ``thread=False`` runs it on the event loop instead, for
        cheap, pure functions that never block. ``scopes`` are the OAuth scopes a call
        needs over HTTP: a token without them gets 403 ``insufficient_scope`` (see
        ``presa_trio.auth``); the tool is listed for everyone all the same.
        """
        _no_bare("tool", name)

        def register(fn: F) -> F:
            signature = Signature.of(fn)
            tool_name = name or fn.__name__
            derived, wrap = signature.output_shape() if output_schema is None else (None, False)
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
        limiter = trio.CapacityLimiter(settings.max_threads)
        bus = SubscriptionBus(
            max_listeners=settings.max_listeners,
            max_listeners_per_principal=settings.max_listeners_per_principal,
        )
        lifespan = self._lifespan if self._lifespan is not None else _no_lifespan
        async with open_backend(backend or settings.backend) as opened, lifespan(self) as state:
            ring = state_keys if state_keys is not None else settings.state_keys
            if ring is None and (key := await opened.shared_key()) is not None:
                ring = KeyRing([("shared", key)])
            sealer = StateSealer(ring, settings.state_ttl, settings.max_state_bytes)
            async with trio.open_nursery() as nursery:
                runtime = Runtime(
                    nursery,
                    sealer=sealer,
                    thread_limiter=limiter,
                    threads_per_principal=settings.max_threads_per_principal,
                    bus=bus,
                    backend=opened,
                    max_background=settings.max_background,
                    max_background_per_principal=settings.max_background_per_principal,
                    lifespan_state=state,
                )
                try:
                    if opened.shared:
                        await nursery.start(runtime.relay_events)
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
        backend: str | None = None,
        state_keys: KeyRing | None = None,
        auth: BearerAuth | None = None,
        **options: Any,
    ) -> AsgiApp:
        """The Streamable HTTP ASGI app for this server (see ``presa_trio.AsgiApp``);
        ``backend``, ``state_keys`` and ``auth`` override the server's settings for it."""
        from ._transports.asgi import AsgiApp  # an embedding that serves no HTTP never loads it

        if backend is not None:
            parse_url(backend)
        run = partial(self.open_runtime, backend, state_keys)
        chosen = auth if auth is not None else self.auth
        return AsgiApp(self.dispatcher, run, auth=chosen, **options)

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
