"""The 2026-07-28 dialect: per-request ``_meta``, versions, capabilities, result stamping.

Everything a request carries about its client is read here, per request, and never
remembered (wire §2). Method routing and params validation live elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypeGuard

from ..errors import InvalidParams, UnsupportedVersion

PROTOCOL_VERSION = "2026-07-28"
SUPPORTED_VERSIONS: tuple[str, ...] = (PROTOCOL_VERSION,)

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
META_PROGRESS_TOKEN = "progressToken"

# Ordered from least to most severe (spec 2026-07-28 server/utilities/logging.mdx).
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

# Methods removed in 2026-07-28; they are simply unknown here (wire §1.2).
COMPLETE = "complete"
INPUT_REQUIRED = "input_required"


class RequestMeta(NamedTuple):
    """What one request says about its client.

    Immutable (the tasks of one client share one, ``ext/tasks/_shared_meta.py``): a named
    tuple, made in less than half the time of a frozen dataclass, which sets each field through
    ``object.__setattr__``; every request reads one."""

    protocol_version: str
    client_capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None
    log_level: str | None
    progress_token: str | int | None


def read_meta(params: object) -> RequestMeta:
    """Read the required per-request fields, or raise -32602 (wire §2.2)."""
    if not isinstance(params, dict):
        raise InvalidParams("Invalid params: params must be an object carrying _meta")
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams("Invalid params: params._meta is required")
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        raise InvalidParams(f"Invalid params: _meta is missing {META_PROTOCOL_VERSION}")
    capabilities = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise InvalidParams(f"Invalid params: _meta is missing {META_CLIENT_CAPABILITIES}")
    info = meta.get(META_CLIENT_INFO)
    log_level = meta.get(META_LOG_LEVEL)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise InvalidParams(f"Invalid params: unknown {META_LOG_LEVEL} {log_level!r}")
    token = meta.get(META_PROGRESS_TOKEN)
    if token is not None and not (type(token) is int or isinstance(token, str)):
        raise InvalidParams("Invalid params: progressToken must be a string or an integer")
    return RequestMeta(
        protocol_version=version,
        client_capabilities=capabilities,
        client_info=info if isinstance(info, dict) else None,  # informational: lenient
        log_level=log_level,
        progress_token=token,
    )


def check_version(meta: RequestMeta, supported: tuple[str, ...] = SUPPORTED_VERSIONS) -> None:
    if meta.protocol_version not in supported:
        raise UnsupportedVersion(meta.protocol_version, list(supported))


def is_object(value: object) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``value`` is a JSON object as read: a mapping. A dict, what a parser makes, is
    known without the ABC check that ``isinstance(value, Mapping)`` runs."""
    return type(value) is dict or isinstance(value, Mapping)


def declares(capabilities: Mapping[str, Any], required: Mapping[str, Any]) -> bool:
    """True when ``capabilities`` declares every object in ``required`` (a fragment of
    ``ClientCapabilities`` such as ``{"sampling": {"tools": {}}}``). The one capability check.

    A declaration is an object; anything else (``true``, a string) declares nothing. One
    compatibility rule of the spec lives here: ``elicitation: {}`` means form mode only, so a
    client that lists elicitation modes must list ``form`` to satisfy ``{"elicitation": {}}``.
    """
    for key, sub in required.items():
        have = capabilities.get(key)
        if not is_object(have):
            return False
        if key == "elicitation" and not sub and have and "form" not in have:
            return False
        if sub and not declares(have, sub):
            return False
    return True


def nested(*path: str) -> dict[str, Any]:
    """``("elicitation", "url")`` as the fragment ``{"elicitation": {"url": {}}}``."""
    fragment: dict[str, Any] = {}
    for key in reversed(path):
        fragment = {key: fragment}
    return fragment


def has_capability(capabilities: Mapping[str, Any], *path: str) -> bool:
    """True when ``capabilities`` declares the object at ``path``, e.g. ("elicitation", "url")."""
    return declares(capabilities, nested(*path))


def has_extension(capabilities: Mapping[str, Any], extension_id: str) -> bool:
    return declares(capabilities, {"extensions": {extension_id: {}}})


def log_enabled(meta: RequestMeta, level: str) -> bool:
    """Log notifications go out only at or above the level the request opted in to (wire §16)."""
    if meta.log_level is None:
        return False
    return LOG_LEVELS.index(level) >= LOG_LEVELS.index(meta.log_level)
