"""CORS for browser clients, opt-in (``asgi_app(cors=True)`` or ``cors=Cors(...)``): a pure
decision over headers.

The origins allowed are exactly those Host/Origin admission allows (``HostPolicy``), so one
allow-list governs both. A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is
answered 204 with the method and the request headers an MCP client sends, plus those the
``Cors`` settings allow (the W3C trace-context headers unless told otherwise); every answer to
an allowed origin names that origin, never ``*``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import final

#: Request headers a browser MCP client sends; always allowed (with ``Mcp-Param-*``).
ALLOWED_HEADERS = frozenset(
    {"content-type", "accept", "authorization", "last-event-id", "mcp-protocol-version",
     "mcp-method", "mcp-name", "mcp-session-id"}
)  # fmt: skip
#: W3C Trace Context and Baggage: what a browser client with tracing adds to every request.
TRACE_HEADERS = ("traceparent", "tracestate", "baggage")


@final
@dataclass(frozen=True, slots=True)
class Cors:
    """CORS settings for ``asgi_app(cors=...)``; ``cors=True`` is ``Cors()``.

    ``allow_headers`` are the request headers a preflight allows besides those an MCP client
    sends (``Content-Type``, ``Authorization``, ``Mcp-*``... always allowed): by default the
    trace headers (``traceparent``, ``tracestate``, ``baggage``), so that a browser client
    with tracing passes its preflight. Names are matched without regard to case.
    """

    allow_headers: Collection[str] = TRACE_HEADERS

    def __post_init__(self) -> None:
        if isinstance(self.allow_headers, str):
            raise TypeError("allow_headers is a collection of header names, not one string")
        names = frozenset(name.strip().lower() for name in self.allow_headers)
        if "" in names or any(not _is_token(name) for name in names):
            raise ValueError(f"allow_headers holds a name that is not a header name: {names}")
        object.__setattr__(self, "allow_headers", names | ALLOWED_HEADERS)


_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")


def _is_token(name: str) -> bool:
    """An HTTP field name (RFC 9110 token), lower-cased."""
    return bool(name) and set(name) <= _TOKEN_CHARS


MAX_AGE = b"600"
#: What a browser client may read of an answer besides the basics: the challenge of a 401 or
#: 403 (spec basic/authorization), sent when the app verifies tokens.
EXPOSE_AUTH = (b"access-control-expose-headers", b"www-authenticate")
#: The session id an older-era ``initialize`` answers with, and the challenge as above.
EXPOSE_SESSION = (b"access-control-expose-headers", b"mcp-session-id")
EXPOSE_BOTH = (b"access-control-expose-headers", b"mcp-session-id, www-authenticate")
#: The methods of an endpoint that serves older-era sessions (their GET stream and DELETE).
SESSION_METHODS = b"POST, GET, DELETE"


def expose(*, auth: bool, sessions: bool) -> tuple[bytes, bytes] | None:
    """The ``Access-Control-Expose-Headers`` an endpoint's answers carry, if any."""
    if auth and sessions:
        return EXPOSE_BOTH
    if auth:
        return EXPOSE_AUTH
    return EXPOSE_SESSION if sessions else None


def allow_origin(origins: Sequence[str]) -> list[tuple[bytes, bytes]]:
    """Response headers for a request whose (already admitted) ``Origin`` values are
    ``origins``: the origin named back, when there is exactly one."""
    if len(origins) != 1 or origins[0] == "null":
        return []
    return [
        (b"access-control-allow-origin", origins[0].encode("latin-1")),
        (b"vary", b"origin"),
    ]


def preflight(
    headers: Iterable[tuple[bytes, bytes]],
    methods: bytes = b"POST",
    allowed_headers: Collection[str] = ALLOWED_HEADERS,
) -> list[tuple[bytes, bytes]]:
    """Response headers for a preflight: ``methods`` (the MCP endpoint's ``POST``; ``GET``
    for a metadata document), and the requested headers among ``allowed_headers`` (lower
    case; ``Cors.allow_headers``) or ``Mcp-Param-*``; others are left out, so the browser
    refuses."""
    requested = b""
    for name, value in headers:
        if name == b"access-control-request-headers":
            requested = value
    names = [n.strip().lower() for n in requested.decode("latin-1").split(",") if n.strip()]
    allowed = [n for n in names if n in allowed_headers or n.startswith("mcp-param-")]
    return [
        (b"access-control-allow-methods", methods),
        (b"access-control-allow-headers", ", ".join(allowed).encode("latin-1")),
        (b"access-control-max-age", MAX_AGE),
    ]
