"""The exception tree: one class per JSON-RPC error code a server may send.

Each class knows its code and, for HTTP, its status (wire §12.1); the dispatcher is the one
place that turns them into error responses. Tool authors raise these for *protocol* faults;
a tool's own failure is a result with ``isError: true`` (see ``ToolError``).
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "CapacityExceeded",
    "Forbidden",
    "HeaderMismatch",
    "InsufficientScope",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "McpError",
    "MethodNotFound",
    "MissingCapability",
    "ParseError",
    "RequestCancelled",
    "RequestTimeout",
    "RequestTooLarge",
    "ResourceNotFound",
    "ServiceUnavailable",
    "SessionConflict",
    "SessionNotFound",
    "SessionRequired",
    "StreamNotHeld",
    "ToolError",
    "Unauthorized",
    "UnsupportedVersion",
]


class McpError(Exception):
    """A protocol error that becomes a JSON-RPC error response.

    ``http_status`` is what Streamable HTTP answers when the error is decided before a
    response stream starts; afterwards the error travels in-band on the stream.
    """

    code: ClassVar[int] = -32603
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    @property
    def http_headers(self) -> tuple[tuple[str, str], ...]:
        """Headers an HTTP answer carries with this error (none but for authorization)."""
        return ()

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(McpError):
    code = -32700
    http_status = 400


class InvalidRequest(McpError):
    code = -32600
    http_status = 400


class Forbidden(InvalidRequest):
    """Refused before anything else is read: a Host or Origin that is not allowed (HTTP 403)."""

    http_status = 403


class Unauthorized(InvalidRequest):
    """No valid bearer token: missing, malformed, rejected or expired (HTTP 401).

    ``challenge`` is the ``WWW-Authenticate`` value that goes with it (spec basic/authorization
    §Error Handling): it names the Protected Resource Metadata, and ``error="invalid_token"``
    when a token was presented but not accepted (RFC 6750 §3.1).
    """

    http_status = 401

    def __init__(self, message: str, challenge: str) -> None:
        super().__init__(message)
        self.challenge = challenge

    @property
    def http_headers(self) -> tuple[tuple[str, str], ...]:
        return (("www-authenticate", self.challenge),)


class InsufficientScope(Forbidden):
    """The token is valid but lacks scopes this request needs (HTTP 403, RFC 6750 §3.1).

    ``scopes`` are all the scopes the operation needs, held or not (the spec asks for them in
    one challenge); ``data.requiredScopes`` lists them too, for a client that reads the
    error in-band, where no header can reach it.
    """

    def __init__(self, message: str, challenge: str, scopes: list[str]) -> None:
        super().__init__(message, {"requiredScopes": scopes})
        self.challenge = challenge
        self.scopes = scopes

    @property
    def http_headers(self) -> tuple[tuple[str, str], ...]:
        return (("www-authenticate", self.challenge),)


class RequestTimeout(InvalidRequest):
    """The request body did not arrive within the server's deadline (HTTP 408)."""

    http_status = 408


class RequestTooLarge(InvalidRequest):
    """The request body is over the transport's limit (HTTP 413); nothing more is read."""

    http_status = 413


class MethodNotFound(McpError):
    code = -32601
    http_status = 404


class InvalidParams(McpError):
    code = -32602
    http_status = 400


class ResourceNotFound(InvalidParams):
    """A resource that does not exist: -32602 in 2026-07-28 (SEP-2164), and -32002, the
    older era's own code, on an ``initialize`` session (``legacy_code``)."""

    legacy_code: ClassVar[int] = -32002

    def __init__(self, uri: str) -> None:
        super().__init__("Resource not found", {"uri": uri})


class SessionNotFound(McpError):
    """An ``Mcp-Session-Id`` that names no live session of this principal: HTTP 404, which
    tells an older-era client to start over with ``initialize``. A session of another
    principal is answered exactly like an unknown one."""

    code = -32001
    http_status = 404

    def __init__(self) -> None:
        super().__init__("Session not found")


class RequestCancelled(McpError):
    """An older-era session's request its client cancelled (``notifications/cancelled``).
    Over HTTP its stream still ends, with this (-32800), which the client ignores; on stdio
    the request is not answered at all."""

    code = -32800

    def __init__(self) -> None:
        super().__init__("Request cancelled")


class SessionRequired(InvalidRequest):
    """A request of the older era without ``Mcp-Session-Id``: HTTP 400 (about the exchange
    itself, so not the HTTP 200 that errors on a live session get)."""

    def __init__(self) -> None:
        super().__init__("Bad Request: Mcp-Session-Id header is required")


class SessionConflict(InvalidRequest):
    """A second GET stream for a session that already has one: HTTP 409."""

    http_status = 409


class StreamNotHeld(InvalidRequest):
    """A ``Last-Event-ID`` that names no place in a stream this session still holds: never
    given, expired, or another session's (all answered alike): HTTP 400."""

    def __init__(self) -> None:
        super().__init__(
            "Bad Request: Last-Event-ID names no event of a stream this session still holds"
        )


class InternalError(McpError):
    code = -32603
    http_status = 500


class ServiceUnavailable(InternalError):
    """The server cannot take this request now (not started, or shutting down): HTTP 503.

    ``data.retryable`` tells a client (or a load balancer) that another try may succeed.
    """

    http_status = 503

    def __init__(self, message: str) -> None:
        super().__init__(message, {"retryable": True})


class CapacityExceeded(InternalError):
    """A bounded resource is full (tasks, listen streams): ``limit`` names which bound.

    Raised below the dispatcher (a task store, the listen bus) and answered as it is: a
    retryable -32603 with HTTP 503 that names the limit, never a traceback.
    """

    http_status = 503

    def __init__(self, limit: str, message: str = "Capacity exhausted") -> None:
        super().__init__(message, {"retryable": True, "limit": limit})
        self.limit = limit


class HeaderMismatch(McpError):
    code = -32020
    http_status = 400


class MissingCapability(McpError):
    """The request needs a client capability it did not declare (wire §2.4).

    ``required`` is a ``ClientCapabilities`` object such as ``{"sampling": {}}``.
    """

    code = -32021
    http_status = 400

    def __init__(self, message: str, required: dict[str, Any]) -> None:
        super().__init__(message, {"requiredCapabilities": required})


class UnsupportedVersion(McpError):
    code = -32022
    http_status = 400

    def __init__(self, requested: str, supported: list[str]) -> None:
        super().__init__(
            "Unsupported protocol version", {"supported": supported, "requested": requested}
        )


class ToolError(Exception):
    """Raised inside a tool to end the call with an ``isError: true`` result.

    Unlike ``McpError`` this is the tool's own failure, shown to the model so it can
    correct itself (spec 2026-07-28 server/tools.mdx §Error Handling).
    """
