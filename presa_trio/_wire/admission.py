"""DNS-rebinding admission: is this Host/Origin pair allowed to talk to us? (wire §13.2)

A pure decision over two header values. It returns a reason to refuse, or None; the HTTP
edge turns a refusal into 403. Authentication is out of scope here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import final
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


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


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end != -1 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def refuse_reason(policy: HostPolicy, host: str | None, origin: str | None) -> str | None:
    if not policy.enabled:
        return None
    if host is not None and _host_name(host) not in policy.allowed_hosts:
        return f"Host {host!r} is not allowed"
    if origin is None or origin == "null":
        return None
    if origin.lower().rstrip("/") in policy.allowed_origins:
        return None
    try:
        parts = urlsplit(origin)
        origin_host = parts.hostname
    except ValueError:
        return f"Origin {origin!r} is not allowed"
    if parts.scheme not in ("http", "https") or origin_host is None:
        return f"Origin {origin!r} is not allowed"
    name = f"[{origin_host}]" if ":" in origin_host else origin_host
    if name not in policy.allowed_hosts and origin_host not in policy.allowed_hosts:
        return f"Origin {origin!r} is not allowed"
    return None
