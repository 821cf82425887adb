"""One line of a capture, read: a bare JSON-RPC message, or a record that says who sent it and
what the HTTP exchange around it looked like.

A record is ``{"direction": "client"|"server", "message": {...}, "t": 0.01, "conn": 3,
"exchange": 17, "http": {"method": "POST", "status": 200, "headers": {...}}, "sse": {"id":
"...", "event": "..."}, "body": "..."}``; every member but ``direction`` is optional (a server
line may lack ``message`` when the HTTP response had no JSON-RPC body). ``sse`` (the event's
id and name, for a message that came as an SSE event) and ``body`` (the start of a body that
was not JSON) are kept for the reader; they are checked for shape only.

Pure: a parsed JSON value in, a ``Record`` or a reason out; it checks the record's own shape,
never the message inside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

CLIENT, SERVER = "client", "server"
DIRECTIONS = (CLIENT, SERVER)

#: A record's members; anything else in an object that has ``direction`` is a mistake.
_RECORD_KEYS = frozenset({"direction", "message", "t", "conn", "exchange", "http", "sse", "body"})


@final
@dataclass(frozen=True, slots=True)
class Record:
    """A capture line, read. ``message`` is None when the line carries no JSON-RPC message
    (an HTTP response without a body); ``direction`` is None for a bare message."""

    message: Any
    direction: str | None = None
    t: float | None = None
    conn: Any = None
    exchange: Any = None
    http_method: str | None = None
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    has_http: bool = False

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


def is_record(value: object) -> bool:
    """A record (rather than a bare message): an object with ``direction`` and no
    ``jsonrpc`` member of its own."""
    return isinstance(value, dict) and "direction" in value and "jsonrpc" not in value


def read_record(value: object) -> Record | str:
    """``value`` (a parsed line) as a ``Record``, or why it is not one."""
    if not is_record(value):
        return Record(message=value)
    assert isinstance(value, dict)
    unknown = sorted(set(value) - _RECORD_KEYS)
    if unknown:
        return f"a capture record has no member {unknown[0]!r}"
    direction = value["direction"]
    if direction not in DIRECTIONS:
        return f"direction must be 'client' or 'server', not {direction!r}"
    t = value.get("t")
    if t is not None and (isinstance(t, bool) or not isinstance(t, int | float)):
        return f"t must be a number of seconds, not {t!r}"
    for key in ("conn", "exchange"):
        number = value.get(key)
        if number is not None and (isinstance(number, bool) or not isinstance(number, int | str)):
            return f"{key} must be an integer or a string, not {number!r}"
    sse = value.get("sse", {})
    if not isinstance(sse, dict) or not all(
        key in ("id", "event") and isinstance(text, str) for key, text in sse.items()
    ):
        return f"sse must be an object with string members id and event, not {sse!r}"
    if not isinstance(value.get("body", ""), str):
        return f"body must be a string, not {value['body']!r}"
    if "message" not in value and "http" not in value:
        return "a capture record needs a message, an http member, or both"
    if "message" in value and value["message"] is None:
        return "message must be a JSON-RPC message; leave it out when there is none"
    http = value.get("http")
    if http is None:
        return Record(value.get("message"), direction, t, value.get("conn"), value.get("exchange"))
    return _with_http(value, http, direction, t)


def _with_http(
    value: dict[str, Any], http: object, direction: str, t: float | None
) -> Record | str:
    if not isinstance(http, dict):
        return "http must be an object"
    method = http.get("method")
    if method is not None and not isinstance(method, str):
        return f"http.method must be a string, not {method!r}"
    status = http.get("status")
    if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
        return f"http.status must be an integer, not {status!r}"
    raw = http.get("headers", {})
    if not isinstance(raw, dict):
        return "http.headers must be an object of header names to values"
    headers: dict[str, str] = {}
    for name, header in raw.items():
        if isinstance(header, list) and all(isinstance(v, str) for v in header):
            header = ", ".join(header)
        if not isinstance(header, str):
            return f"the value of header {name!r} must be a string"
        headers[name.lower()] = header
    return Record(
        value.get("message"),
        direction,
        t,
        value.get("conn"),
        value.get("exchange"),
        method,
        status,
        headers,
        has_http=True,
    )
