"""``Server``: the object users declare tools, resources, prompts and completions on.

It owns everything a deployment needs (registry, schema validators, the subscription bus,
extensions, the background nursery), so several servers can live in one process. It does no
I/O itself: transports (``asgi_app``, stdio) feed it messages.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

from . import _typeschema
from ._context import Context
from ._dispatch import Dispatcher
from ._extensions import Extension
from ._methods import core_methods
from ._registry import (
    Completer,
    Handler,
    Prompt,
    Resource,
    ResourceTemplate,
    Signature,
    Tool,
    prompt_arguments,
)
from ._request_state import DEFAULT_TTL_SECONDS, KeyRing, StateSealer
from ._schema import Schemas
from ._subscriptions import SubscriptionBus, flag_event, resource_updated_event
from ._wire import dialect

F = TypeVar("F", bound=Handler)


def _doc(fn: Handler) -> str | None:
    doc = inspect.getdoc(fn)
    return doc.strip() if doc else None


class Server:
    """An MCP 2026-07-28 server: declare what it serves, then run it on a transport.

    >>> server = Server("demo", version="1.0.0")
    >>> @server.tool()
    ... async def greet(name: str) -> str:
    ...     "Say hello."
    ...     return f"Hello, {name}!"
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
    ) -> None:
        if cache_scope not in ("public", "private"):
            raise ValueError("cache_scope must be 'public' or 'private'")
        self.name = name
        self.version = version
        self.server_info: dict[str, Any] = {"name": name, "version": version}
        if title is not None:
            self.server_info["title"] = title
        self.instructions = instructions
        self.validate_inbound = validate_inbound
        self.validate_outbound = validate_outbound
        self.list_ttl_ms = list_ttl_ms
        self.cache_scope = cache_scope
        self.page_size = page_size
        self.logging = logging
        self.supported_versions: tuple[str, ...] = dialect.SUPPORTED_VERSIONS
        self.schemas = schemas if schemas is not None else Schemas()
        self.notification_definitions = self.schemas.notification_definitions()
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.templates: dict[str, ResourceTemplate] = {}
        self.prompts: dict[str, Prompt] = {}
        self.completers: dict[tuple[str, str], Completer] = {}
        self.extensions: list[Extension] = []
        self.bus = SubscriptionBus()
        self.sealer = StateSealer(state_keys, state_ttl)
        # Who is asking (from your authentication), so a requestState issued to one principal
        # is refused for another (wire §10.4). None: every request is the same principal.
        self.principal = principal
        self.dispatcher = Dispatcher(self)
        self._background: trio.Nursery | None = None
        for method in core_methods(self):
            self.dispatcher.add(method)

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
    ) -> Callable[[F], F]:
        """Declare a tool. The input schema comes from the type hints unless given.

        The description defaults to the docstring. ``options`` carries settings that
        extensions read (for example a task policy); the core ignores them.
        """

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            if tool_name in self.tools:
                raise ValueError(f"tool {tool_name!r} is declared twice")
            schema = (
                dict(input_schema) if input_schema is not None else _typeschema.input_schema_for(fn)
            )
            out = (
                dict(output_schema)
                if output_schema is not None
                else _typeschema.output_schema_for(fn)
            )
            self.tools[tool_name] = Tool(
                name=tool_name,
                description=description or _doc(fn) or tool_name,
                input_schema=schema,
                signature=Signature.of(fn),
                title=title,
                output_schema=out,
                annotations=dict(annotations) if annotations is not None else None,
                icons=[dict(i) for i in icons] if icons is not None else None,
                meta=dict(meta) if meta is not None else None,
                options=dict(options or {}),
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
    ) -> Callable[[F], F]:
        """Declare a resource at a fixed URI; its function returns str, bytes or contents.

        A URI with ``{variables}`` declares a resource template instead; the function then
        takes the variables as keyword arguments.
        """

        def register(fn: F) -> F:
            entry_type = ResourceTemplate if "{" in uri else Resource
            entry = entry_type(
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
            )
            table: dict[str, Any] = (
                self.templates if entry_type is ResourceTemplate else self.resources
            )
            if uri in table:
                raise ValueError(f"resource {uri!r} is declared twice")
            table[uri] = entry
            return fn

        return register

    def prompt(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        arguments: Sequence[Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Declare a prompt; its parameters are its (string) arguments."""

        def register(fn: F) -> F:
            prompt_name = name or fn.__name__
            if prompt_name in self.prompts:
                raise ValueError(f"prompt {prompt_name!r} is declared twice")
            self.prompts[prompt_name] = Prompt(
                name=prompt_name,
                description=description or _doc(fn) or prompt_name,
                signature=Signature.of(fn),
                arguments=[dict(a) for a in arguments]
                if arguments is not None
                else prompt_arguments(fn),
                title=title,
            )
            return fn

        return register

    def completion(
        self, *, prompt: str | None = None, resource: str | None = None
    ) -> Callable[[F], F]:
        """Declare the completer of a prompt's or resource template's arguments.

        The function receives ``(argument_name, value, context_arguments)`` and returns an
        iterable of suggestions (the first 100 are sent).
        """
        if (prompt is None) == (resource is None):
            raise ValueError("give exactly one of prompt= or resource=")
        key = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", str(resource))

        def register(fn: F) -> F:
            self.completers[key] = fn
            return fn

        return register

    def add_extension(self, extension: Extension) -> None:
        """Plug in a protocol extension (its methods, hooks and capability)."""
        if any(e.id == extension.id for e in self.extensions):
            raise ValueError(f"extension {extension.id!r} is already added")
        self.extensions.append(extension)
        for method in extension.methods(self):
            self.dispatcher.add(method)

    # ------------------------------------------------------------------ advertising

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.tools:
            caps["tools"] = {"listChanged": True}
        if self.resources or self.templates:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self.prompts:
            caps["prompts"] = {"listChanged": True}
        if self.completers:
            caps["completions"] = {}
        if self.logging:
            caps["logging"] = {}
        if self.extensions:
            caps["extensions"] = {e.id: e.settings() for e in self.extensions}
        return caps

    def stamp(self, result: dict[str, Any]) -> dict[str, Any]:
        """Add ``serverInfo`` to a result's ``_meta`` (wire §3.3)."""
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {dialect.META_SERVER_INFO: self.server_info}
        else:
            meta.setdefault(dialect.META_SERVER_INFO, self.server_info)
        return result

    # ------------------------------------------------------------------ change notifications

    def notify_tools_changed(self) -> int:
        """Tell every listener that asked for it that the tool list changed."""
        return self.bus.publish(flag_event("notifications/tools/list_changed", "toolsListChanged"))

    def notify_prompts_changed(self) -> int:
        return self.bus.publish(
            flag_event("notifications/prompts/list_changed", "promptsListChanged")
        )

    def notify_resources_changed(self) -> int:
        return self.bus.publish(
            flag_event("notifications/resources/list_changed", "resourcesListChanged")
        )

    def notify_resource_updated(self, uri: str) -> int:
        """Tell the listeners subscribed to ``uri`` (or a parent of it) that it changed."""
        return self.bus.publish(resource_updated_event(uri))

    # ------------------------------------------------------------------ running

    @property
    def background(self) -> trio.Nursery:
        """The long-lived nursery (open while ``running()`` is); extensions start work here."""
        if self._background is None:
            raise RuntimeError("the server is not running: use 'async with server.running()'")
        return self._background

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Server]:
        """Own the server's background nursery for the lifetime of a transport.

        On exit, listen streams end gracefully and background work is cancelled.
        """
        async with trio.open_nursery() as nursery:
            self._background = nursery
            try:
                for extension in self.extensions:
                    await nursery.start(
                        lambda task_status, e=extension: e.serve(self, task_status=task_status)
                    )
                yield self
            finally:
                self.bus.close()
                self._background = None
                nursery.cancel_scope.cancel()

    def asgi_app(self, **options: Any) -> Any:
        """The Streamable HTTP ASGI app for this server (see ``presa_trio.AsgiApp``)."""
        from ._transports.asgi import AsgiApp

        return AsgiApp(self, **options)
