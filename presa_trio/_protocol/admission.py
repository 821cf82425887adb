"""DNS-rebinding admission: is this Host/Origin pair allowed to talk to us? (wire §13.2)

A pure decision over two header values. It returns a reason to refuse, or None; the HTTP
edge turns a refusal into 403. Authentication is out of scope here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import final

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


@functools.lru_cache(maxsize=64)  # a server hears the same few Host values on every request
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
