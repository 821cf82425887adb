"""The request context a handler sees: who asked, with which capabilities, and a way back.

A ``Context`` lives exactly as long as one request (wire §2: nothing is remembered between
requests). It carries request-scoped notifications (progress, log) to the request's own
response stream; it never sends a request to the client (wire §13.3).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from ._mrtr import RESPONSE_DEFINITIONS, InputRequired, can_ask, check_askable
from ._wire import dialect
from ._wire.dialect import RequestMeta
from ._wire.headers import RoutingHeaders
from ._wire.jsonrpc import RequestId, notification_message
from .errors import InvalidParams, MissingCapability

if TYPE_CHECKING:
    from ._server import Server

logger = logging.getLogger("presa_trio")

Notify = Callable[[dict[str, Any]], Awaitable[None]]
InputRequests = Mapping[str, Mapping[str, Any]]
InputProvider = Callable[["Context", InputRequests], Awaitable[dict[str, Any]]]


class Context:
    """Everything a tool, resource or prompt handler may know about its request.

    Declare a parameter annotated ``Context`` and presa_trio passes it in; it never shows up
    in the tool's ``inputSchema``.
    """

    __slots__ = (
        "_last_progress",
        "_notify",
        "extras",
        "headers",
        "input_provider",
        "input_responses",
        "keepalive",
        "meta",
        "method",
        "params",
        "request_id",
        "round",
        "server",
        "state",
    )

    def __init__(
        self,
        server: Server,
        request_id: RequestId,
        method: str,
        params: Mapping[str, Any],
        meta: RequestMeta,
        notify: Notify,
        headers: RoutingHeaders | None = None,
        keepalive: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.server = server
        self.request_id = request_id
        self.method = method
        self.params = params
        self.meta = meta
        self._notify = notify
        # The HTTP routing headers (None on stdio): tools/call checks Mcp-Param-* with them.
        self.headers = headers
        self.keepalive = keepalive
        # MRTR (wire §10): the retry's answers, and the verified state of the round it closes.
        responses = params.get("inputResponses")
        self.input_responses: Mapping[str, Any] = responses if isinstance(responses, dict) else {}
        self.state: Mapping[str, Any] | None = None
        self.round = 0
        # Who answers ``await ctx.input(...)``: None means an MRTR round (this request ends
        # input_required); an extension running the handler detached (a task) parks instead.
        self.input_provider: InputProvider | None = None
        self._last_progress: float | None = None
        # Per-request scratch space for extensions and middleware; dies with the request.
        self.extras: dict[str, Any] = {}

    @property
    def capabilities(self) -> Mapping[str, Any]:
        """This request's client capabilities (never an earlier request's)."""
        return self.meta.client_capabilities

    def has_capability(self, *path: str) -> bool:
        """``ctx.has_capability("elicitation", "url")`` is True when declared on this request."""
        return dialect.has_capability(self.meta.client_capabilities, *path)

    def require_capability(self, *path: str) -> None:
        """Raise -32021 (HTTP 400) unless this request declared the capability at ``path``."""
        if not self.has_capability(*path):
            required: dict[str, Any] = {}
            node = required
            for key in path:
                node[key] = {}
                node = node[key]
            raise MissingCapability(
                f"This request requires the {'.'.join(path)} capability", required
            )

    async def notify(self, message: dict[str, Any]) -> None:
        """Send a raw notification on this request's own stream (validated when on)."""
        await self._notify(message)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress on this request's stream; a no-op unless it sent a progressToken.

        ``progress`` must increase from one call to the next (spec basic/patterns/progress): a
        value that does not is dropped with a warning rather than failing the request.
        """
        token = self.meta.progress_token
        if token is None:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            logger.warning(
                "progress %s after %s dropped: it must increase", progress, self._last_progress
            )
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._notify(notification_message("notifications/progress", params))

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` if this request opted in at ``level`` or below.

        Logging is deprecated in 2026-07-28 and off unless the request's ``_meta`` names a
        ``logLevel`` (wire §16).
        """
        if level not in dialect.LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        if not dialect.log_enabled(self.meta, level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._notify(notification_message("notifications/message", params))

    # ------------------------------------------------------------------ MRTR (wire §10)

    def can_ask(self, request: Mapping[str, Any]) -> bool:
        """True when this request's client declared what ``request`` needs (wire §10.5)."""
        return can_ask(self.meta.client_capabilities, request)

    def ask(
        self,
        requests: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
    ) -> NoReturn:
        """End this round with ``input_required``: the client answers and retries.

        Raises -32021 instead if the client did not declare a capability a request needs;
        check ``can_ask`` first to degrade gracefully. ``state`` comes back on the retry as
        ``ctx.state``, verified.
        """
        check_askable(self.meta.client_capabilities, requests or {})
        raise InputRequired(requests, state)

    def answers(
        self,
        requests: Mapping[str, Mapping[str, Any]],
        *,
        state: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The client's answers to ``requests``; asks for whichever are still missing.

        Each answer is checked against the result type of its request (-32602 if it is not,
        say, an ``ElicitResult``). Unknown extra answers are ignored (wire §10.3).
        """
        found: dict[str, Any] = {}
        missing: dict[str, Mapping[str, Any]] = {}
        for key, request in requests.items():
            response = self.input_responses.get(key)
            if response is None:
                missing[key] = request
                continue
            definition = RESPONSE_DEFINITIONS[request["method"]]
            violations = self.server.schemas.violations(definition, response)
            if violations:
                raise InvalidParams(
                    f"inputResponses.{key} is not a valid {definition}: {violations[0]}"
                )
            found[key] = response
        if missing:
            self.ask(missing, state=state)
        return found

    async def input(
        self, requests: InputRequests, *, state: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Get the client's answers to ``requests``, however this handler is running.

        In an ordinary request this is ``answers``: missing answers end the request with
        ``input_required`` and the retry brings them. When the handler runs as a task, the
        task parks until ``tasks/update`` delivers them. Write tools that may become tasks
        with ``await ctx.input(...)``.
        """
        if self.input_provider is not None:
            return await self.input_provider(self, requests)
        return self.answers(requests, state=state)
