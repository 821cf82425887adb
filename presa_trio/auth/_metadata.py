"""OAuth 2.0 Protected Resource Metadata (RFC 9728) for an MCP server: the resource
identifier, where its metadata document lives, and the document itself.

Pure: URLs in, URLs and a JSON-ready dict out (spec 2026-07-28
basic/authorization/authorization-server-discovery.mdx). Serving the document is the HTTP
edge's job; fetching authorization server metadata is the client's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from ._challenge import check_quotable

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def check_url(url: str, what: str) -> str:
    """``url`` if it is an absolute https URL (http for a loopback host, for development)
    with no fragment, query or userinfo: what RFC 9728 and RFC 8414 ask of identifiers."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        raise ValueError(f"{what} {url!r} is not a URL") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{what} {url!r} must be an absolute https URL")
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
        raise ValueError(f"{what} {url!r} must use https (http only on a loopback host)")
    if parts.fragment or "#" in url or parts.query or "?" in url or "@" in parts.netloc:
        raise ValueError(f"{what} {url!r} must have no query, fragment or userinfo")
    return check_quotable(url, what)


def canonical(url: str) -> str:
    """``url`` compared as the spec asks (basic/authorization §Canonical Server URI): scheme
    and host in lower case, a default port and a trailing slash dropped."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return url
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def metadata_url(resource: str) -> str:
    """Where the metadata of ``resource`` lives: the well-known suffix inserted between its
    host and its path (RFC 9728 §3.1), ``https://h/mcp`` -> ``https://h/.well-known/
    oauth-protected-resource/mcp``."""
    parts = urlsplit(resource)
    path = "" if parts.path == "/" else parts.path
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def metadata_path(resource: str) -> str:
    """The path of ``metadata_url(resource)``, at the root of the resource's host: for an app
    mounted under ``/api`` (resource ``https://h/api/mcp``) a path outside the mount,
    ``/.well-known/oauth-protected-resource/api/mcp``, that the host must route to it."""
    return urlsplit(metadata_url(resource)).path


def metadata_paths(resource: str, endpoint: str) -> frozenset[str]:
    """The paths, below the app's mount point, that serve the document: the RFC 9728 path of
    ``resource``, the same suffix on the app's own ``endpoint``, and the bare well-known path
    that clients try last (spec authorization-server-discovery §Well-Known URI)."""
    return frozenset({metadata_path(resource), WELL_KNOWN + endpoint, WELL_KNOWN})


def document(
    resource: str,
    authorization_servers: Sequence[str],
    *,
    scopes_supported: Sequence[str] | None = None,
    resource_name: str | None = None,
    resource_documentation: str | None = None,
) -> dict[str, Any]:
    """The Protected Resource Metadata document (RFC 9728 §2); bearer tokens are accepted in
    the ``Authorization`` header only."""
    found: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": list(authorization_servers),
        "bearer_methods_supported": ["header"],
    }
    if scopes_supported is not None:
        found["scopes_supported"] = list(scopes_supported)
    if resource_name is not None:
        found["resource_name"] = resource_name
    if resource_documentation is not None:
        found["resource_documentation"] = resource_documentation
    return found


def check_servers(servers: Iterable[str]) -> tuple[str, ...]:
    """Authorization server issuer identifiers: at least one (spec §Authorization Server
    Location), each an https URL."""
    if isinstance(servers, str):
        raise ValueError("authorization_servers must be a list of issuer URLs, not one string")
    found = tuple(check_url(s, "authorization server") for s in servers)
    if not found:
        raise ValueError("authorization_servers must name at least one authorization server")
    return found
