"""Generic hooks through which protocol extensions plug into a server (spec basic/versioning).

An extension can add request methods, wrap ``tools/call``, advertise settings under
``capabilities.extensions``, start a service for each run, and accept its own keys in a
``subscriptions/listen`` filter. On the older era's sessions it can add methods, declare
capabilities in ``initialize`` and add fields to the tools a ``tools/list`` describes. What
it may touch of the server is its ``ExtensionContext`` and nothing else. The core never
names any extension.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, ClassVar, final

import trio

from .._backends.protocol import Backend
from .._protocol.dialect import is_object
from .._protocol.input_requests import check_responses
from .._protocol.schema import Schemas
from ..errors import InvalidParams
from .bus import BusEvent
from .context import Context
from .registry import Registry, Tool
from .routes import Route
from .runtime import Runtime, ServiceProvider, ServiceT
from .tracing import Tracing

CallNext = Callable[[Context, Tool, Mapping[str, Any]], Awaitable[dict[str, Any]]]


@final
class ExtensionContext:
    """What an extension may use of its server and of one run.

    It is handed to ``Extension.serve`` when a run starts; keep it in the service you start.
    """

    __slots__ = ("_registry", "_runtime", "schemas", "tracing")

    def __init__(
        self,
        runtime: Runtime,
        registry: Registry,
        schemas: Schemas,
        *,
        tracing: Tracing | None = None,
    ) -> None:
        self._runtime = runtime
        self._registry = registry
        self.schemas = schemas
        #: Where the server's spans go (``Tracing.start``), or None: it does not trace.
        self.tracing = tracing

    def publish(
        self, method: str, params: Mapping[str, Any], *, key: str, value: str | None = None
    ) -> int:
        """Send a notification to this run's listen streams whose filter selects it.

        ``key`` is the filter key (one of ``filter_keys``); with ``value``, the filter's list
        under ``key`` must contain it, otherwise the filter's flag must be true.
        """
        return self._runtime.publish(BusEvent(method, params, key, value))

    def tool(self, name: str) -> Tool | None:
        return self._registry.tools.get(name)

    @property
    def backend(self) -> Backend:
        """Where this run's workers share state (``presa_trio.backends``)."""
        return self._runtime.backend

    @property
    def draining(self) -> trio.Event:
        """Set when the run begins shutting down: stop admitting new work."""
        return self._runtime.draining

    def check_input_responses(
        self, requests: Mapping[str, Mapping[str, Any]], responses: Mapping[str, Any]
    ) -> None:
        """Raise -32602 if an answer is not its input request's result type (wire §10.3)."""
        check_responses(self.schemas, requests, responses)


class Extension(ServiceProvider[ServiceT]):
    """Subclass and override the hooks you need; every default is a no-op.

    An extension whose ``serve`` starts a service names its type, ``class
    MyExtension(Extension[MyService])``, and ``ctx.service(my_extension)`` is then typed
    ``MyService``; a plain ``Extension`` subclass gets ``Any``.
    """

    #: The extension identifier advertised in ``capabilities.extensions`` (prefix required).
    id: ClassVar[str] = ""

    def settings(self) -> dict[str, Any]:
        """The settings object advertised for this extension in ``server/discover``."""
        return {}

    def negotiate(self, settings: object) -> None:
        """Check the settings a request declared for this extension, on every such request.

        Called during admission, after the core ``_meta`` checks and before method lookup;
        raise an ``McpError`` to refuse the request. The default accepts any settings object.
        """
        if not is_object(settings):
            raise InvalidParams(f"Settings for extension {self.id} must be an object")

    def routes(self) -> Iterable[Route]:
        """Request methods this extension serves (validated and gated like core ones)."""
        return ()

    async def call_tool(
        self, ctx: Context, tool: Tool, arguments: Mapping[str, Any], call_next: CallNext
    ) -> dict[str, Any]:
        """Wrap ``tools/call`` after the tool is found and its headers checked."""
        return await call_next(ctx, tool, arguments)

    def session_routes(self, version: str) -> Iterable[Route]:
        """Request methods this extension serves on the older era's sessions of protocol
        ``version`` (``2025-06-18``, ``2025-11-25``), where that version's schema names them.
        They come before a ``routes`` method of the same name there; their results are
        checked against ``result_def`` in that version's schema."""
        return ()

    def session_capabilities(self, ctx: Context) -> Mapping[str, Any]:
        """Server capabilities an ``initialize`` result declares besides the core ones, for
        the session ``ctx`` opens (``ctx.meta.protocol_version`` is its version; the run's
        service is ``ctx.service(self)``)."""
        return {}

    def session_tool(self, ctx: Context, tool: Tool) -> Mapping[str, Any]:
        """Fields added to ``tool``'s description in a session's ``tools/list`` (the result
        is still checked against that version's ``Tool``)."""
        return {}

    async def serve(
        self, context: ExtensionContext, *, task_status: trio.TaskStatus[ServiceT]
    ) -> None:
        """This extension's service for one run, in the run's background nursery.

        Call ``task_status.started(service)``; handlers find ``service`` for their run with
        ``ctx.service(extension)``. It is cancelled at shutdown. An error raised before
        ``started`` fails startup; one raised after it is logged and ends only this service.
        """
        await trio.lowlevel.checkpoint()
        task_status.started(None)  # type: ignore[arg-type]  # no service; one that has one says so

    def filter_keys(self) -> frozenset[str]:
        """``subscriptions/listen`` filter keys this extension understands."""
        return frozenset()

    async def accept_filter(self, ctx: Context, requested: Mapping[str, Any]) -> dict[str, Any]:
        """From the requested filter, the part of this extension's keys the server honours.

        Raise an ``McpError`` to refuse the whole listen request.
        """
        await trio.lowlevel.checkpoint()
        return {}
