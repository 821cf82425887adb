"""An HTTP request's headers (wire §13): one pass over them, the Host/Origin admission
against DNS rebinding (§13.2), and the SEP-2243 routing headers compared with the body
(§13.4-13.6).

Pure functions over the raw header list an ASGI server hands us. Admission returns a reason to
refuse, or None (the HTTP edge answers 403); every routing failure is ``HeaderMismatch``
(-32020, HTTP 400). It knows no tools or methods (the caller says which value each header
must mirror) and nothing of authentication.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, final

from ..errors import HeaderMismatch

# ---------------------------------------------------------------------------- one pass


def scan(
    raw: Iterable[tuple[bytes, bytes]],
) -> tuple[list[str], list[str], list[str], dict[str, list[bytes]]]:
    """One pass over the request headers: every Host, Origin and Authorization value in
    order, and the ``Mcp-*`` headers grouped by name for ``RoutingHeaders.grouped``. ASGI
    servers should give the names in lower case; one that does not is read the same."""
    kept: tuple[list[str], list[str], list[str]] = ([], [], [])
    mcp: dict[str, list[bytes]] = {}
    for name, value in raw:
        if not name.islower():
            name = name.lower()
        place = _KEPT.get(name)
        if place is not None:
            kept[place].append(value.decode("latin-1"))
        elif name.startswith(b"mcp-"):
            mcp.setdefault(name.decode("latin-1"), []).append(value)
    return *kept, mcp


_KEPT = {b"host": 0, b"origin": 1, b"authorization": 2}  # their places in ``kept`` above


# ---------------------------------------------------------------------------- Host and Origin


LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})

# An HTTP(S) origin as browsers serialise it: scheme, host, optional port, nothing else.
# No userinfo, no backslash, no path: ``http://evil.com\\@localhost`` is not an origin.
_ORIGIN = re.compile(r"(https?)://(\[[0-9a-f:.]+\]|[a-z0-9.\-_~%]+)(?::[0-9]{1,5})?/?")


@final
@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Which ``Host`` names and ``Origin`` hosts are accepted.

    The default admits loopback names only, which is right for a server bound to
    127.0.0.1. A deployment behind a public name lists its names in ``allowed_hosts``
    (and browser origins in ``allowed_origins``); ``enabled=False`` switches the check off.
    """

    allowed_hosts: frozenset[str] = LOOPBACK_HOSTS
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    enabled: bool = True


_IPV6_CHARS = frozenset("0123456789abcdef:.")
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9.\-_~%]+)(?::[0-9]{1,5})?")


def _host_name(host: str) -> str | None:
    """The name in a ``Host`` value (``name[:port]``, or a bare IPv6 literal such as
    ``::1``), or None when it is not one."""
    host = host.strip().lower()
    match = _HOST.fullmatch(host)
    if match is None:
        return host if host.count(":") > 1 and set(host) <= _IPV6_CHARS else None
    return match.group(1)


def refuse_reason(policy: HostPolicy, host: str | None, origin: str | None) -> str | None:
    if not policy.enabled:
        return None
    if host is not None and _host_name(host) not in policy.allowed_hosts:
        return f"Host {host!r} is not allowed"
    if origin is None or origin == "null":
        return None
    if origin.lower().rstrip("/") in policy.allowed_origins:
        return None
    match = _ORIGIN.fullmatch(origin.strip().lower())
    if match is None:
        return f"Origin {origin!r} is not allowed"
    name = match.group(2)
    if name not in policy.allowed_hosts and name.strip("[]") not in policy.allowed_hosts:
        return f"Origin {origin!r} is not allowed"
    return None


def refuse_any(policy: HostPolicy, hosts: Iterable[str], origins: Iterable[str]) -> str | None:
    """The first reason to refuse among every ``Host`` and every ``Origin`` value a request
    carries: a repeated header is allowed only when each of its values is."""
    for host in hosts:
        if (reason := refuse_reason(policy, host, None)) is not None:
            return reason
    for origin in origins:
        if (reason := refuse_reason(policy, None, origin)) is not None:
            return reason
    return None


# ---------------------------------------------------------------------------- routing headers

PROTOCOL_VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
PARAM_PREFIX = "mcp-param-"

_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SENTINEL_HEAD = "=?base64?"
_SENTINEL_TAIL = "?="


class RoutingHeaders:
    """The MCP headers of one HTTP request, names lower-cased, repeats remembered."""

    __slots__ = ("_values",)

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        values: dict[str, list[bytes]] = {}
        for name, value in raw:
            if name[:4].lower() == b"mcp-":  # decode only the few names we care about
                values.setdefault(name.decode("latin-1").lower(), []).append(value)
        self._values = values

    @classmethod
    def grouped(cls, values: dict[str, list[bytes]]) -> RoutingHeaders:
        """From headers a transport has already grouped: each lower-case ``mcp-*`` name with
        its values in order (what ``__init__`` builds from the raw list)."""
        headers = cls.__new__(cls)
        headers._values = values
        return headers

    def get(self, name: str) -> str | None:
        """The trimmed value of a single-valued MCP header, or None when absent."""
        found = self._values.get(name)
        if found is None:
            return None
        if len(found) > 1:
            raise HeaderMismatch(f"Header {name} must appear once, got {len(found)}")
        text = _trimmed(found[0])
        if text is None:
            raise HeaderMismatch(f"Header {name} has characters outside visible ASCII")
        return text

    def decoded(self, name: str) -> str | None:
        value = self.get(name)
        return None if value is None else decode_value(name, value)


def _trimmed(raw: bytes) -> str | None:
    """``raw`` as text without surrounding blanks; None if it holds more than visible ASCII
    (tabs and the characters from space to ``~``)."""
    text = raw.decode("latin-1")
    if not (text.isascii() and text.replace("\t", " ").isprintable()):
        return None
    return text.strip(" \t")


def decode_value(name: str, value: str) -> str:
    """Undo the ``=?base64?...?=`` wrapper; anything else is a literal (wire §13.6)."""
    if not (value.startswith(_SENTINEL_HEAD) and value.endswith(_SENTINEL_TAIL)):
        return value
    if len(value) < len(_SENTINEL_HEAD) + len(_SENTINEL_TAIL):
        return value
    inner = value[len(_SENTINEL_HEAD) : -len(_SENTINEL_TAIL)]
    try:
        return base64.b64decode(inner, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise HeaderMismatch(f"Header {name} has an invalid base64 value") from None


def check_protocol_version_present(headers: RoutingHeaders) -> str:
    version = headers.get(PROTOCOL_VERSION_HEADER)
    if version is None:
        raise HeaderMismatch("Missing MCP-Protocol-Version header")
    return version


def check_protocol_version_matches(header_version: str, meta_version: str) -> None:
    if header_version != meta_version:
        raise HeaderMismatch(
            f"MCP-Protocol-Version header {header_version!r} does not match "
            f"_meta protocolVersion {meta_version!r}"
        )


def check_method(headers: RoutingHeaders, method: str) -> None:
    value = headers.get(METHOD_HEADER)
    if value is None:
        raise HeaderMismatch("Missing Mcp-Method header")
    if value != method:
        raise HeaderMismatch(f"Mcp-Method header {value!r} does not match method {method!r}")


def check_name(headers: RoutingHeaders, expected: object, *, required: bool = True) -> None:
    """``Mcp-Name`` must be present (unless not ``required``); when the body has the value,
    they must be equal. A header that is present and differs is refused either way."""
    value = headers.decoded(NAME_HEADER)
    if value is None:
        if not required:
            return
        raise HeaderMismatch("Missing Mcp-Name header")
    if isinstance(expected, str) and value != expected:
        raise HeaderMismatch(f"Mcp-Name header {value!r} does not match {expected!r}")


@dataclass(frozen=True, slots=True)
class HeaderParam:
    """A tool argument mirrored into ``Mcp-Param-<header>`` (an ``x-mcp-header`` property)."""

    path: tuple[str, ...]
    header: str
    json_type: str  # "string" | "integer" | "boolean"


def check_params(
    headers: RoutingHeaders, params: Sequence[HeaderParam], arguments: Mapping[str, Any]
) -> None:
    for param in params:
        name = PARAM_PREFIX + param.header.lower()
        value = headers.decoded(name)
        body = _lookup(arguments, param.path)
        if body is None:
            if value is not None:
                raise HeaderMismatch(f"Header Mcp-Param-{param.header} has no body argument")
            continue
        if value is None:
            raise HeaderMismatch(f"Missing Mcp-Param-{param.header} header")
        if not _same(value, body):
            raise HeaderMismatch(f"Mcp-Param-{param.header} header does not match its argument")


def _lookup(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _same(header: str, body: object) -> bool:
    if isinstance(body, bool):  # before int: bool is an int in Python
        return header == ("true" if body else "false")
    if isinstance(body, int | float):
        if not _JSON_NUMBER.fullmatch(header):
            return False
        try:
            return Decimal(header) == Decimal(repr(body))
        except InvalidOperation:
            return False
    return isinstance(body, str) and header == body


def header_params_of(schema: Mapping[str, Any]) -> tuple[HeaderParam, ...]:
    """Collect and check the ``x-mcp-header`` declarations of an ``inputSchema``.

    Raises ``ValueError`` for a declaration that would make clients drop the tool (wire §5.1):
    bad token, duplicate name, unsupported type, or a property not reachable through
    ``properties`` chains alone.
    """
    found: list[HeaderParam] = []
    seen: set[str] = set()

    def walk(node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        properties = node.get("properties")
        if not isinstance(properties, Mapping):
            return
        for key, prop in properties.items():
            if not isinstance(prop, Mapping):
                continue
            header = prop.get("x-mcp-header")
            if header is not None:
                _check_declaration(key, header, prop, seen)
                seen.add(header.lower())
                found.append(HeaderParam((*path, key), header, prop["type"]))
            walk(prop, (*path, key))

    walk(schema, ())
    if _count_declarations(schema) != len(found):
        raise ValueError("x-mcp-header is allowed only on properties reached through 'properties'")
    return tuple(found)


def _count_declarations(node: object) -> int:
    if isinstance(node, Mapping):
        own = 1 if isinstance(node.get("x-mcp-header"), str) else 0
        return own + sum(_count_declarations(v) for v in node.values())
    if isinstance(node, list):
        return sum(_count_declarations(v) for v in node)
    return 0


_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _check_declaration(key: str, header: object, prop: Mapping[str, Any], seen: set[str]) -> None:
    if not isinstance(header, str) or not header or not set(header) <= _TCHAR:
        raise ValueError(f"x-mcp-header of {key!r} must be a non-empty HTTP token")
    if header.lower() in seen:
        raise ValueError(f"x-mcp-header {header!r} is declared twice")
    if prop.get("type") not in ("string", "integer", "boolean"):
        raise ValueError(f"x-mcp-header property {key!r} must be a string, integer or boolean")
