"""The dispatcher: admits a request, runs its handler, and is the ONE place errors become responses.

Admission follows wire §12.3 (headers, ``_meta``, version, method, ``Mcp-Name``, params
against the schema ``$def``); then the handler runs with a ``Context``. Every ``McpError``
turns into a JSON-RPC error with its HTTP status here; anything else is logged and answered
-32603 without detail. Transports supply a ``Responder`` and never build errors themselves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._context import Context
from ._mrtr import InputRequired
from ._request_state import binding_digest
from ._schema import error_definition
from ._wire import dialect
from ._wire import headers as routing
from ._wire.jsonrpc import Request, RequestId, error_message, result_message
from .errors import InternalError, InvalidParams, McpError, MethodNotFound

if TYPE_CHECKING:
    from ._server import Server

logger = logging.getLogger("presa_trio")

MethodHandler = Callable[[Context, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Method:
    """A routable request method and what the dispatcher must check around it.

    ``request_def``/``result_def`` name schema ``$defs``; ``name_param`` is the params key that
    ``Mcp-Name`` mirrors; ``input_required`` says whether MRTR results are allowed (wire §10).
    ``available`` gates the method on what the server advertises (-32601 when False).
    """

    name: str
    handler: MethodHandler
    request_def: str | None = None
    result_def: str | None = None
    name_param: str | None = None
    input_required: bool = False
    available: Callable[[], bool] = lambda: True
    # Extra admission step after params validation (e.g. an extension's capability gate).
    gate: Callable[[dialect.RequestMeta, dict[str, Any]], None] | None = None


class Responder(Protocol):
    """How a transport carries one request's messages back to its client."""

    async def notify(self, message: dict[str, Any]) -> None:
        """Send a request-scoped notification (may turn the response into a stream)."""

    async def keepalive(self) -> None:
        """Keep a quiet long-lived stream open (an SSE comment on HTTP)."""

    async def finish(self, message: dict[str, Any], status: int) -> None:
        """Send the final response; ``status`` is the HTTP status if no stream started yet."""


class Dispatcher:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.methods: dict[str, Method] = {}

    def add(self, method: Method) -> None:
        if method.name in self.methods:
            raise ValueError(f"method {method.name!r} is already routed")
        self.methods[method.name] = method

    def admit(
        self, request: Request, headers: routing.RoutingHeaders | None
    ) -> tuple[Method, dialect.RequestMeta]:
        """Run the admission ladder of wire §12.3 (steps 5-12); raise the first failure."""
        header_version = None
        if headers is not None:
            header_version = routing.check_protocol_version_present(headers)
        meta = dialect.read_meta(request.params)
        if header_version is not None:
            routing.check_protocol_version_matches(header_version, meta.protocol_version)
        dialect.check_version(meta, self.server.supported_versions)
        if self.server.extensions:
            self._negotiate(meta)
        if headers is not None:
            routing.check_method(headers, request.method)
        method = self.methods.get(request.method)
        if method is None or not method.available():
            raise MethodNotFound(f"Method not found: {request.method}")
        params: dict[str, Any] = request.params
        if headers is not None and method.name_param is not None:
            routing.check_name(headers, params.get(method.name_param))
        if method.request_def is not None and self.server.validate_inbound:
            message = {
                "jsonrpc": "2.0",
                "id": request.id,
                "method": request.method,
                "params": params,
            }
            violations = self.server.schemas.violations(method.request_def, message)
            if violations:
                first = violations[0]
                raise InvalidParams(
                    f"Invalid params: {first.pointer or '/'}: {first.message}",
                    {"pointer": first.pointer},
                )
        if method.gate is not None:
            method.gate(meta, params)
        return method, meta

    async def serve(
        self,
        request: Request,
        headers: routing.RoutingHeaders | None,
        responder: Responder,
    ) -> None:
        """Answer one request through ``responder``; never raises except ``Cancelled``."""
        status = 200
        try:
            method, meta = self.admit(request, headers)
            ctx = Context(
                self.server,
                request.id,
                request.method,
                request.params,
                meta,
                self._checked_notify(responder),
                headers,
                responder.keepalive,
            )
            if method.input_required:
                if "requestState" in request.params:
                    self._resume(method, ctx)
                try:
                    result = await method.handler(ctx, request.params)
                except InputRequired as asked:
                    binding = self._binding(method, ctx)
                    result = self._input_required(asked, binding, ctx.round + 1)
            else:
                result = await method.handler(ctx, request.params)
            message = result_message(request.id, result)
            self._check_result(method, message)
        except McpError as exc:
            message, status = error_message(request.id, exc), exc.http_status
        except Exception:
            logger.exception("unhandled error in %s", request.method)
            error = InternalError("Internal error")
            message, status = error_message(request.id, error), error.http_status
        if self.server.validate_outbound and "error" in message:
            self._check_error(message)
        await responder.finish(message, status)

    def _negotiate(self, meta: dialect.RequestMeta) -> None:
        """Per-request extension negotiation: each declared extension checks its settings."""
        declared = meta.client_capabilities.get("extensions")
        if not isinstance(declared, Mapping):
            return
        for extension in self.server.extensions:
            if extension.id in declared:
                extension.negotiate(declared[extension.id])

    def _binding(self, method: Method, ctx: Context) -> str:
        """What a round's ``requestState`` is bound to: method, name/uri, arguments, principal."""
        name = ctx.params.get(method.name_param) if method.name_param else None
        principal = self.server.principal(ctx) if self.server.principal is not None else ""
        return binding_digest(method.name, name, ctx.params.get("arguments"), principal)

    def _resume(self, method: Method, ctx: Context) -> None:
        """Verify a retry's ``requestState`` onto ``ctx`` (-32602 if it does not verify)."""
        token = ctx.params["requestState"]
        unsealed = self.server.sealer.unseal(
            token, binding=self._binding(method, ctx), now=time.time()
        )
        ctx.state, ctx.round = unsealed.data, unsealed.round

    def _input_required(self, asked: InputRequired, binding: str, round: int) -> dict[str, Any]:
        result: dict[str, Any] = {"resultType": dialect.INPUT_REQUIRED}
        if asked.requests:
            result["inputRequests"] = asked.requests
        result["requestState"] = self.server.sealer.seal(
            asked.state, binding=binding, round=round, now=time.time()
        )
        return self.server.stamp(result)

    def _checked_notify(self, responder: Responder) -> Callable[[dict[str, Any]], Awaitable[None]]:
        if not self.server.validate_outbound:
            return responder.notify
        definitions = self.server.notification_definitions

        async def notify(message: dict[str, Any]) -> None:
            definition = definitions.get(message["method"], "JSONRPCNotification")
            violations = self.server.schemas.violations(definition, message)
            if violations:
                raise InternalError(f"Server built an invalid notification: {violations[0]}")
            await responder.notify(message)

        return notify

    def _check_result(self, method: Method, message: Mapping[str, Any]) -> None:
        if not self.server.validate_outbound:
            return
        result = message["result"]
        result_type = result.get("resultType")
        if result_type == dialect.INPUT_REQUIRED:
            if not method.input_required:
                raise InternalError(f"{method.name} cannot answer input_required")
            definition = "InputRequiredResult"
        elif result_type == dialect.COMPLETE and method.result_def is not None:
            definition = method.result_def
        else:
            definition = "Result"
        violations = self.server.schemas.violations(definition, result)
        if violations:
            logger.error("invalid %s result dropped: %s", method.name, violations)
            raise InternalError("Server produced an invalid result")

    def _check_error(self, message: dict[str, Any]) -> None:
        definition = error_definition(message["error"]["code"])
        violations = self.server.schemas.violations(definition, message)
        if violations:  # our own bug: say so loudly, still answer
            logger.error("invalid error response: %s", violations)


def request_id_of(message: Mapping[str, Any]) -> RequestId | None:
    value = message.get("id")
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None
