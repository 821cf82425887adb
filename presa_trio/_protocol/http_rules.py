"""The HTTP around a captured message: its status against its body, the SEP-2243 routing
headers of a 2026-07-28 request against the request, the response's content type.

Pure functions over one ``Record`` and what the checker knows of it; each yields ``(pointer,
reason)`` pairs, the pointer into the message the header or status must agree with. spec
2026-07-28 basic/transports/streamable-http.mdx (wire §12, §13.4-13.6).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import HeaderMismatch
from .capture_records import Record
from .dialect import META_PROTOCOL_VERSION
from .headers import METHOD_HEADER, NAME_HEADER, PROTOCOL_VERSION_HEADER, decode_value

Problem = tuple[str, str]

#: The request member ``Mcp-Name`` mirrors, per method (wire §13.5; SEP-2663 for tasks/*).
NAME_MEMBERS: dict[str, str] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

#: The HTTP statuses a 2026-07-28 error may travel with when it is the whole JSON response
#: (wire §12.1): MUSTs where the spec has one, the recommended and the in-band 200 elsewhere.
#: An invalid request refused at the HTTP level keeps its own status: 401 (no valid token),
#: 403 (an Origin or Host not allowed, which MUST be 403 and MAY carry an error without an
#: id; a scope missing), 408 (a body that did not arrive in time), 409 (a second stream of a
#: session) and 413 (a body over the limit); an internal error the client may retry travels
#: with 503. Codes not listed (application errors) are not checked.
ERROR_STATUSES: dict[int, frozenset[int]] = {
    -32700: frozenset({400}),
    -32600: frozenset({400, 401, 403, 408, 409, 413}),
    -32601: frozenset({404}),
    -32602: frozenset({200, 400}),
    -32603: frozenset({200, 500, 503}),
    -32020: frozenset({400}),
    -32021: frozenset({400}),
    -32022: frozenset({400}),
}

_META_POINTER = "/params/_meta/" + META_PROTOCOL_VERSION.replace("/", "~1")


def _decoded(value: str) -> str | None:
    """An ``Mcp-Name`` value with its ``=?base64?...?=`` wrapper undone (None: bad Base64)."""
    try:
        return decode_value(NAME_HEADER, value)
    except HeaderMismatch:
        return None


def routing_headers(record: Record, message: Mapping[str, Any]) -> Iterator[Problem]:
    """A 2026-07-28 request's ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``
    against its body: each present and equal."""
    method = message.get("method")
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    header = record.header(PROTOCOL_VERSION_HEADER)
    if header is None:
        yield _META_POINTER, "the MCP-Protocol-Version header is missing"
    elif isinstance(version, str) and header != version:
        yield (
            _META_POINTER,
            (f"the MCP-Protocol-Version header {header!r} does not match the body's {version!r}"),
        )
    header = record.header(METHOD_HEADER)
    if header is None:
        yield "/method", "the Mcp-Method header is missing"
    elif header != method:
        yield "/method", f"the Mcp-Method header {header!r} does not match method {method!r}"
    member = NAME_MEMBERS.get(method) if isinstance(method, str) else None
    if member is None:
        return
    header = record.header(NAME_HEADER)
    expected = params.get(member)
    if header is None:
        yield f"/params/{member}", "the Mcp-Name header is missing"
        return
    decoded = _decoded(header)
    if decoded is None:
        yield f"/params/{member}", f"the Mcp-Name header {header!r} is not valid Base64"
    elif isinstance(expected, str) and decoded != expected:
        yield (
            f"/params/{member}",
            (f"the Mcp-Name header {decoded!r} does not match {member} {expected!r}"),
        )


def content_type(record: Record) -> Iterator[Problem]:
    """A response that carries a message is JSON or an event stream."""
    value = record.header("content-type")
    if value is None:
        yield "", "the response has no Content-Type header"
        return
    kind = value.split(";", 1)[0].strip().lower()
    if kind not in ("application/json", "text/event-stream"):
        yield "", f"Content-Type {value!r} is neither application/json nor text/event-stream"


def is_stream(record: Record) -> bool:
    value = record.header("content-type") or ""
    return value.split(";", 1)[0].strip().lower() == "text/event-stream"


def status_of_message(
    record: Record, message: Mapping[str, Any], modern: bool
) -> Iterator[Problem]:
    """The status a server message arrived with, against the message: anything on an event
    stream or that is not an error travels with 200; a 2026-07-28 error answered as JSON with
    the status its code requires."""
    status = record.status
    if status is None:
        return
    error = message.get("error")
    if not isinstance(error, dict) or is_stream(record):
        if status != 200:
            what = (
                "an event stream" if is_stream(record) else "a JSON-RPC message other than an error"
            )
            yield "", f"HTTP {status} with {what}; expected 200"
        return
    code = error.get("code")
    if not modern or not isinstance(code, int):
        return
    allowed = ERROR_STATUSES.get(code)
    if allowed is not None and status not in allowed:
        expected = " or ".join(str(s) for s in sorted(allowed))
        yield "/error/code", f"a {code} error travels with HTTP {expected}, not {status}"


def status_without_message(record: Record, answered: str | None) -> Iterator[Problem]:
    """A server line with no JSON-RPC body, against what the client sent in that exchange:
    ``answered`` is "notification", "response", "request", or None when unknown. A
    notification or a response is accepted with 202 (or refused with a 4xx); a request is
    never answered by an empty 2xx."""
    status = record.status
    if status is None or answered is None or is_stream(record):
        return
    if answered in ("notification", "response"):
        if status != 202 and not 400 <= status < 500:
            yield "", f"HTTP {status} for a client {answered}; expected 202 (or a 4xx refusal)"
    elif answered == "request" and 200 <= status < 300:
        yield "", f"HTTP {status} with no body for a request; a request is answered by a response"
