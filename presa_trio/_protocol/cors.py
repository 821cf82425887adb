"""CORS for browser clients, opt-in (``asgi_app(cors=True)``): a pure decision over headers.

The origins allowed are exactly those Host/Origin admission allows (``HostPolicy``), so one
allow-list governs both. A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is
answered 204 with the method and the request headers an MCP client sends; every answer to an
allowed origin names that origin, never ``*``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: Request headers a browser MCP client may send.
ALLOWED_HEADERS = frozenset(
    {"content-type", "accept", "authorization", "last-event-id", "mcp-protocol-version",
     "mcp-method", "mcp-name", "mcp-session-id"}
)  # fmt: skip
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
    headers: Iterable[tuple[bytes, bytes]], methods: bytes = b"POST"
) -> list[tuple[bytes, bytes]]:
    """Response headers for a preflight: ``methods`` (the MCP endpoint's ``POST``; ``GET``
    for a metadata document), and the requested headers that an MCP client sends
    (``Mcp-Param-*`` included); others are left out, so the browser refuses."""
    requested = b""
    for name, value in headers:
        if name == b"access-control-request-headers":
            requested = value
    names = [n.strip().lower() for n in requested.decode("latin-1").split(",") if n.strip()]
    allowed = [n for n in names if n in ALLOWED_HEADERS or n.startswith("mcp-param-")]
    return [
        (b"access-control-allow-methods", methods),
        (b"access-control-allow-headers", ", ".join(allowed).encode("latin-1")),
        (b"access-control-max-age", MAX_AGE),
    ]
