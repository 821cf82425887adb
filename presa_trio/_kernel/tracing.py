"""Optional OpenTelemetry spans, named and attributed per the semantic conventions for MCP
(opentelemetry semantic-conventions-genai ``docs/gen-ai/mcp.md``; spec 2026-07-28 basic/index.mdx
"OpenTelemetry trace context").

A SERVER span per request whose parent is the trace context the client put in ``_meta``, an
INTERNAL span per tool run, and the plain spans an extension asks for (a task's). It uses the
``opentelemetry-api`` package only: the spans go to whatever tracer provider the application
configured. It deliberately costs nothing when tracing is off: nothing here imports
opentelemetry until a ``Tracing`` is built, and the request path checks one attribute. Every
call into OpenTelemetry is guarded: a tracing failure is logged once and never fails a request.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, final

import trio

from .._protocol.dialect import META_PROTOCOL_VERSION
from .._protocol.input_requests import InputRequired
from .._protocol.jsonrpc import Request
from ..errors import McpError

if TYPE_CHECKING:
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.trace import Span, Tracer, TracerProvider

logger = logging.getLogger("presa_trio")

SCOPE_NAME = "presa_trio"  # the instrumentation scope of every span made here
MISSING_API = (
    "tracing needs the OpenTelemetry API: pip install 'presa_trio[otel]' "
    "(the opentelemetry-api package)"
)
#: The ``_meta`` keys trace context travels in, unprefixed (spec basic/index.mdx).
PROPAGATION_KEYS = ("traceparent", "tracestate", "baggage")
#: The param that names a request's target, and the attribute it is recorded as; the span
#: name carries it only when it is low-cardinality (a tool or prompt name, never a URI).
TARGETS: Mapping[str, tuple[str, str, bool]] = {
    "tools/call": ("name", "gen_ai.tool.name", True),
    "prompts/get": ("name", "gen_ai.prompt.name", True),
    "resources/read": ("uri", "mcp.resource.uri", False),
}
EXECUTE_TOOL = "execute_tool"  # gen_ai.operation.name of a tool call
TOOL_ERROR = "tool_error"  # error.type of a tool result with isError: true
CANCELLED = "cancelled"  # error.type of a request that was cancelled before it answered
#: How a stdio connection is recorded (the conventions' "Recording MCP transport").
PIPE: Mapping[str, Any] = {"network.transport": "pipe"}


def http_attributes(scope: Mapping[str, Any]) -> dict[str, Any]:
    """How one Streamable HTTP request's connection is recorded, from its ASGI scope."""
    attributes: dict[str, Any] = {"network.transport": "tcp", "network.protocol.name": "http"}
    version = scope.get("http_version")
    if isinstance(version, str):
        attributes["network.protocol.version"] = version
    client = scope.get("client")
    if isinstance(client, tuple | list) and len(client) == 2 and isinstance(client[1], int):
        attributes["client.address"], attributes["client.port"] = str(client[0]), client[1]
    return attributes


@final
class Tracing:
    """Where a server's spans go: ``Server(tracing=True)`` (the global tracer provider, as
    OpenTelemetry's own instrumentations do) or ``Server(tracing=provider)``.

    Extensions reach it as ``ExtensionContext.tracing`` (None when the server does not
    trace) and start their own spans with ``start``.
    """

    __slots__ = (
        "_attach",
        "_detach",
        "_error",
        "_extract",
        "_failed_once",
        "_internal",
        "_link",
        "_server",
        "_set_span_in_context",
        "_span_of",
        "_status",
        "_tracer",
    )

    def __init__(self, provider: TracerProvider | None = None) -> None:
        try:
            from opentelemetry import context, propagate, trace
        except ImportError as exc:
            raise ImportError(MISSING_API) from exc
        if provider is not None and not callable(getattr(provider, "get_tracer", None)):
            raise TypeError("tracing= takes True, False or an OpenTelemetry TracerProvider")
        # Without a provider, a proxy tracer: it follows the global provider, set now or later.
        source = provider if provider is not None else trace
        self._tracer: Tracer = source.get_tracer(SCOPE_NAME)
        self._attach = context.attach
        self._detach = context.detach
        self._extract = propagate.extract
        self._set_span_in_context = trace.set_span_in_context
        self._span_of = trace.get_current_span
        self._link = trace.Link
        self._server = trace.SpanKind.SERVER
        self._internal = trace.SpanKind.INTERNAL
        self._status = trace.Status
        self._error = trace.StatusCode.ERROR
        self._failed_once = False

    def _failed(self, what: str) -> None:
        """A tracing failure: logged the first time (with its trace), then silently."""
        if not self._failed_once:
            self._failed_once = True
            logger.warning("tracing failed while %s; spans may be missing", what, exc_info=True)

    # ------------------------------------------------------------------ spans

    def start(self, name: str, attributes: Mapping[str, Any] | None = None) -> SpanHandle:
        """Start an INTERNAL span, child of the current context. It is not current until
        ``with span.current():``; end it with ``span.end()``."""
        try:
            attributes = dict(attributes or {})
            span = self._tracer.start_span(name, kind=self._internal, attributes=attributes)
        except Exception:
            self._failed("starting a span")
            return SpanHandle(self, None)
        return SpanHandle(self, span)

    def annotate(self, key: str, value: Any) -> None:
        """Set one attribute on the current span: in a request's handler, the request's
        SERVER span (an extension's method records there what it decided). Nothing when no
        span is recording."""
        try:
            self._span_of().set_attribute(key, value)
        except Exception:
            self._failed("setting a span attribute")

    def request(
        self, request: Request, connection: Mapping[str, Any] | None, *, known: bool = True
    ) -> RequestSpan:
        """The SERVER span of one request, current from now until ``end``.

        A method the server does not route (``known=False``) names its span ``_OTHER``, so a
        client cannot mint span names (the attribute still says what it sent).

        Its parent is the trace context in ``params._meta`` (read with the configured
        propagators); the ambient context, if any (an HTTP server span, say), is linked.
        """
        params = request.params if isinstance(request.params, dict) else {}
        attributes: dict[str, Any] = {
            "mcp.method.name": request.method,
            "jsonrpc.request.id": str(request.id),
        }
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        version = meta.get(META_PROTOCOL_VERSION)
        if isinstance(version, str):
            attributes["mcp.protocol.version"] = version
        name = request.method if known else "_OTHER"
        target = TARGETS.get(request.method)
        if target is not None:
            param, key, named = target
            value = params.get(param)
            if isinstance(value, str):
                attributes[key] = value
                name = f"{name} {value}" if named else name
        if request.method == "tools/call":
            attributes["gen_ai.operation.name"] = EXECUTE_TOOL
        if connection:
            attributes.update(connection)
        carrier = {k: meta[k] for k in PROPAGATION_KEYS if isinstance(meta.get(k), str)}
        try:
            parent, links = self._parent(carrier)
            span = self._tracer.start_span(
                name, parent, kind=self._server, attributes=attributes, links=links
            )
            token = self._attach(self._set_span_in_context(span, parent))
        except Exception:
            self._failed("starting a request span")
            return RequestSpan(self, None, None)
        return RequestSpan(self, span, token)

    def _parent(self, carrier: Mapping[str, str]) -> tuple[OtelContext | None, list[Any]]:
        """The context to parent a request span on, and the links it carries."""
        if not carrier:
            return None, []  # the ambient context (if any) is the parent
        ambient = self._span_of().get_span_context()
        parent = self._extract(carrier)
        remote = self._span_of(parent).get_span_context()
        if ambient.is_valid and remote.is_valid and ambient != remote:
            return parent, [self._link(ambient)]
        return parent, []

    @contextmanager
    def tool(self, name: str) -> Iterator[SpanHandle]:
        """The span of one tool run (``execute_tool {name}``), current inside the block.

        A tool result with ``isError`` is recorded as ``tool_error`` (call ``answered``); an
        exception by its class (an ``McpError`` by its code); cancellation as an event, not
        an error: the tool was stopped by whoever owns it, and that owner's span says why.
        An MRTR round ending (``InputRequired``) is not an error either.
        """
        attributes = {"gen_ai.operation.name": EXECUTE_TOOL, "gen_ai.tool.name": name}
        span = self.start(f"{EXECUTE_TOOL} {name}", attributes)
        with span.current():
            try:
                yield span
            except BaseException as exc:
                span.raised(exc)
                raise
            finally:
                span.end()


@final
class SpanHandle:
    """One span, every operation on it guarded (a handle with no span does nothing)."""

    __slots__ = ("_span", "_tracing")

    def __init__(self, tracing: Tracing, span: Span | None) -> None:
        self._tracing = tracing
        self._span = span

    def set(self, key: str, value: Any) -> None:
        """Set one attribute."""
        if self._span is not None:
            try:
                self._span.set_attribute(key, value)
            except Exception:
                self._tracing._failed("setting a span attribute")

    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        if self._span is not None:
            try:
                self._span.add_event(name, dict(attributes or {}))
            except Exception:
                self._tracing._failed("adding a span event")

    def fail(self, error_type: str, description: str | None = None) -> None:
        """Mark the span failed: ``error.type`` and status ERROR (with ``description``)."""
        if self._span is not None:
            try:
                self._span.set_attribute("error.type", error_type)
                tracing = self._tracing
                self._span.set_status(tracing._status(tracing._error, description))
            except Exception:
                self._tracing._failed("recording an error on a span")

    def answered(self, result: Mapping[str, Any]) -> None:
        """Record a tool result: one with ``isError: true`` is a ``tool_error``."""
        if result.get("isError") is True:
            self.fail(TOOL_ERROR)

    def raised(self, exc: BaseException) -> None:
        """Record what ended the span's work early (see ``Tracing.tool``)."""
        if self._span is None:
            return
        cancelled = isinstance(exc, trio.Cancelled)
        if isinstance(exc, BaseExceptionGroup):
            rest = exc.split(trio.Cancelled)[1]  # what is not cancellation
            cancelled = rest is None
            if rest is not None and len(rest.exceptions) == 1:
                exc = rest.exceptions[0]
        if cancelled:
            self.event(CANCELLED)
        elif isinstance(exc, McpError):
            self.fail(str(exc.code), exc.message)
        elif not isinstance(exc, InputRequired):
            self.fail(type(exc).__qualname__, str(exc) or None)
            try:
                self._span.record_exception(exc)
            except Exception:
                self._tracing._failed("recording an exception on a span")

    @contextmanager
    def current(self) -> Iterator[None]:
        """Make this span the current one inside the block (its children nest under it)."""
        token = None
        if self._span is not None:
            try:
                token = self._tracing._attach(self._tracing._set_span_in_context(self._span))
            except Exception:
                self._tracing._failed("making a span current")
        try:
            yield
        finally:
            if token is not None:
                try:
                    self._tracing._detach(token)
                except Exception:
                    self._tracing._failed("leaving a span")

    def end(self) -> None:
        if self._span is not None:
            span, self._span = self._span, None
            try:
                span.end()
            except Exception:
                self._tracing._failed("ending a span")


@final
class RequestSpan:
    """The SERVER span of one request, current in its task until ``end``.

    The dispatcher says how the request ended: ``answered`` (a result), ``refused`` (a
    JSON-RPC error: ``error.type`` and ``rpc.response.status_code`` are its code, the status
    description its message) or neither, when it was cancelled before it answered.
    """

    __slots__ = ("_ended", "_handle", "_token")

    def __init__(self, tracing: Tracing, span: Span | None, token: object) -> None:
        self._handle = SpanHandle(tracing, span)
        self._token = token
        self._ended = False  # how the request ended is recorded

    def answered(self, result: Mapping[str, Any]) -> None:
        self._ended = True
        self._handle.answered(result)

    def refused(self, error: McpError) -> None:
        self._ended = True
        self._handle.set("rpc.response.status_code", str(error.code))
        self._handle.fail(str(error.code), error.message)

    def end(self) -> None:
        if not self._ended:
            self._handle.fail(CANCELLED)
        if self._token is not None:
            tracing, token, self._token = self._handle._tracing, self._token, None
            try:
                tracing._detach(token)  # type: ignore[arg-type]
            except Exception:
                tracing._failed("leaving a request span")
        self._handle.end()
