"""Which protocol era a message belongs to, and the older era's shapes (pure: no I/O).

Two eras share one endpoint (spec 2026-07-28 basic/versioning, backward compatibility): the
2026-07-28 dialect, where every request carries its client in ``_meta`` and nothing is
remembered, and the ``initialize`` era (2025-06-18, 2025-11-25), where a client opens a session
once and every later request names it. ``classify_http`` and ``classify_message`` decide per
message; the rest of this module is what the older era's results and answers look like.
"""

from __future__ import annotations

import enum
import re
import secrets
from collections.abc import Mapping
from typing import Any

from . import dialect

#: The older revisions served, newest first; an ``initialize`` asking for any other (the
#: 2026-07-28 one included) is given the first.
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18")
SESSION_HEADER = "mcp-session-id"

_SESSION_ID = re.compile(r"[\x21-\x7e]{1,256}")


class Era(enum.Enum):
    MODERN = "2026-07-28"
    LEGACY = "initialize"


def _modern_meta(message: object) -> bool:
    params = getattr(message, "params", None)
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and dialect.META_PROTOCOL_VERSION in meta


def classify_http(
    session_id: str | None, version_header: str | None, method: str | None, message: object
) -> Era:
    """The era of one HTTP message: the session header first (a session is the older era's
    own), the protocol-version header second, the body last. A client that negotiated an
    older version but sends modern ``_meta`` keys is on the older path, its header says so;
    an ``initialize`` with neither header opens a session whatever its body carries."""
    if session_id is not None:
        return Era.LEGACY
    if version_header is not None:
        return Era.LEGACY if version_header in LEGACY_VERSIONS else Era.MODERN
    if method == "initialize":
        return Era.LEGACY
    return Era.MODERN


def classify_message(method: str | None, message: object, session_open: bool) -> Era:
    """The era of one stdio message. ``server/discover`` never locks the era; an
    ``initialize`` opens the process's session; inside a session a message is older-era
    unless it carries the modern ``_meta``."""
    if method == "initialize":
        return Era.LEGACY
    if _modern_meta(message):
        return Era.MODERN
    return Era.LEGACY if session_open else Era.MODERN


def negotiate(requested: object) -> str:
    """The version an ``initialize`` gets: the one it asked for when served, else the newest
    older one (the client decides whether it can speak that)."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LEGACY_VERSIONS[0]


def new_session_id() -> str:
    """A fresh session id: 192 random bits as 32 URL-safe characters (visible ASCII)."""
    return secrets.token_urlsafe(24)


def new_stream_id() -> str:
    """A fresh resumable stream's id: 128 random bits as 22 URL-safe characters (a client
    cannot guess another's)."""
    return secrets.token_urlsafe(16)


def event_id(stream_id: str, seq: int) -> str:
    """The id of event ``seq`` of a resumable stream: it names the stream and the place."""
    return f"{stream_id}_{seq}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """The stream and place a ``Last-Event-ID`` names; None for one this server never
    gives."""
    match = _EVENT_ID.fullmatch(value)
    if match is None:
        return None
    return match[1], int(match[2])


_EVENT_ID = re.compile(r"([A-Za-z0-9_-]{22})_(0|[1-9][0-9]{0,8})")


def valid_session_id(value: str) -> bool:
    """Whether ``value`` can be a session id at all (visible ASCII, at most 256 long)."""
    return _SESSION_ID.fullmatch(value) is not None


# ---------------------------------------------------------------------------- shapes


def server_capabilities(modern: Mapping[str, Any], *, logging: bool) -> dict[str, Any]:
    """What an ``initialize`` result declares: the modern capabilities, less what the older
    era has no words for (extensions), with ``logging`` (``logging/setLevel`` is served)."""
    caps = {k: dict(v) for k, v in modern.items() if k != "extensions"}
    if logging:
        caps["logging"] = {}
    return caps


def initialize_result(
    version: str,
    capabilities: Mapping[str, Any],
    server_info: Mapping[str, Any],
    instructions: str | None,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": dict(capabilities),
        "serverInfo": dict(server_info),
    }
    if instructions is not None:
        result["instructions"] = instructions
    return result


#: Result keys the 2026-07-28 dialect adds that an older client was never told of.
_MODERN_KEYS = ("resultType", "ttlMs", "cacheScope")


def project_result(result: dict[str, Any]) -> dict[str, Any]:
    """A dispatcher's result as the older era writes it: no ``resultType``, no cache hints,
    no modern ``_meta`` stamp (keys of the result's own ``_meta`` stay)."""
    for key in _MODERN_KEYS:
        result.pop(key, None)
    meta = result.get("_meta")
    if isinstance(meta, dict):
        meta.pop(dialect.META_SERVER_INFO, None)
        if not meta:
            del result["_meta"]
    return result


def result_definition(definition: str, params: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """The schema ``$def`` a session's result is checked against: ``definition``, the
    route's own, unless the request was task-augmented (``params.task``, 2025-11-25
    basic/utilities/tasks) and was answered with the task it created."""
    if "task" in params and "task" in result:
        return "CreateTaskResult"
    return definition


def legacy_meta(
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any] | None,
    log_level: str | None,
    params: object,
) -> dialect.RequestMeta:
    """The ``RequestMeta`` a session's request is served with: the session's facts, and the
    request's own progress token."""
    token = None
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict):
            candidate = meta.get(dialect.META_PROGRESS_TOKEN)
            if type(candidate) is int or isinstance(candidate, str):
                token = candidate
    return dialect.RequestMeta(version, capabilities, client_info, log_level, token)
