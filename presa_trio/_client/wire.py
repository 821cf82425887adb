"""The client side of both protocol eras, as values: requests, routing headers, answers read.

Pure (no I/O, h11's way): it builds the messages and headers a client sends, reads what comes
back (SSE frames, JSON bodies, result kinds), and decides from the answer to ``server/discover``
which era a server speaks. It does not send anything, wait, or ask anybody anything: the
connection (``_client/connection.py``) does, over a transport. Spec 2026-07-28 wire §2, §4,
§10, §13.4-13.6, §14; the Tasks extension (SEP-2663) for task results; 2025-11-25 for
``initialize`` sessions.
"""

from __future__ import annotations

import base64
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._protocol.dialect import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
)
from .._protocol.era import LEGACY_VERSIONS, SESSION_HEADER
from .._protocol.headers import (
    METHOD_HEADER,
    NAME_HEADER,
    PARAM_PREFIX,
    PROTOCOL_VERSION_HEADER,
    header_params_of,
)

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
UNSUPPORTED_VERSION = -32022
#: What this client can answer: form and URL elicitations. It declares no sampling or roots,
#: so a server that follows the spec never asks for them.
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
MODERN_CAPABILITIES: dict[str, Any] = {**CAPABILITIES, "extensions": {TASKS_EXTENSION: {}}}
#: The methods whose ``Mcp-Name`` header mirrors a param (wire §13.5; SEP-2663 §7).
NAME_PARAMS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})


class Era(enum.Enum):
    MODERN = PROTOCOL_VERSION
    LEGACY = "initialize"


class ProtocolError(Exception):
    """The server answered something this client cannot use (a JSON-RPC error included)."""


class ServerError(ProtocolError):
    """The server answered a JSON-RPC error."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        code, message = error.get("code"), error.get("message", "")
        super().__init__(f"the server answered error {code}: {message}")
        self.code = code
        self.data = error.get("data")


# ---------------------------------------------------------------------------- building


def modern_request(
    request_id: int,
    method: str,
    params: Mapping[str, Any] | None,
    client_info: Mapping[str, Any],
    *,
    progress_token: str | int | None = None,
    capabilities: Mapping[str, Any] = MODERN_CAPABILITIES,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A 2026-07-28 request: the client rides along in ``_meta`` (wire §2); ``meta`` adds
    keys to it or replaces them."""
    body = dict(params or {})
    sent: dict[str, Any] = {
        META_PROTOCOL_VERSION: PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES: dict(capabilities),
        META_CLIENT_INFO: dict(client_info),
    }
    if progress_token is not None:
        sent[META_PROGRESS_TOKEN] = progress_token
    body["_meta"] = {**sent, **(meta or {})}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}


def legacy_request(
    request_id: int,
    method: str,
    params: Mapping[str, Any] | None,
    *,
    progress_token: str | int | None = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A request inside an ``initialize`` session: plain params (``_meta`` only for a
    progress token or what ``meta`` adds)."""
    body = dict(params or {})
    sent = {META_PROGRESS_TOKEN: progress_token} if progress_token is not None else {}
    if sent or meta:
        body["_meta"] = {**sent, **(meta or {})}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}


def initialize_params(
    client_info: Mapping[str, Any],
    *,
    version: str = LEGACY_VERSIONS[0],
    capabilities: Mapping[str, Any] = CAPABILITIES,
) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": dict(capabilities),
        "clientInfo": dict(client_info),
    }


def notification(method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method}


def reply(request_id: Any, result: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to a request an older-era server pushed."""
    return {"jsonrpc": "2.0", "id": request_id, "result": dict(result)}


def refusal(request_id: Any, method: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32601, "message": f"This client does not answer {method}"},
    }


def header_value(value: str) -> str:
    """A header value as wire §13.6 sends it: literal when plain visible ASCII, else
    ``=?base64?...?=``."""
    plain = value.isascii() and value.isprintable() and value == value.strip(" \t")
    if plain and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def http_headers(
    message: Mapping[str, Any],
    era: Era,
    *,
    session_id: str | None = None,
    legacy_version: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
) -> list[tuple[str, str]]:
    """The HTTP headers for POSTing ``message``: the routing headers a 2026-07-28 server
    requires (SEP-2243: version, method, name, ``Mcp-Param-*`` from the tool's
    ``x-mcp-header`` properties), or the older era's session headers."""
    headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ]
    if era is Era.LEGACY:
        if session_id is not None:
            headers.append((SESSION_HEADER, session_id))
        if legacy_version is not None:
            headers.append((PROTOCOL_VERSION_HEADER, legacy_version))
        return headers
    method = message.get("method")
    if not isinstance(method, str):  # a notification or a reply has no routing headers
        return headers
    params = message.get("params") or {}
    headers += [(PROTOCOL_VERSION_HEADER, PROTOCOL_VERSION), (METHOD_HEADER, method)]
    name = params.get(NAME_PARAMS.get(method, ""))
    if isinstance(name, str):
        headers.append((NAME_HEADER, header_value(name)))
    if method == "tools/call" and input_schema is not None:
        headers += _param_headers(input_schema, params.get("arguments") or {})
    return headers


def _param_headers(
    schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> list[tuple[str, str]]:
    try:
        declared = header_params_of(schema)
    except ValueError:
        return []  # a tool whose declarations are broken: its server refuses it anyway
    headers = []
    for param in declared:
        value: Any = arguments
        for key in param.path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = value if isinstance(value, str) else json.dumps(value)
        headers.append((PARAM_PREFIX + param.header.lower(), header_value(text)))
    return headers


# ---------------------------------------------------------------------------- reading


@dataclass
class SseDecoder:
    """Bytes of a ``text/event-stream`` body in, the JSON messages of its events out.

    Comments (keep-alives) and events without data (a resumable stream's priming event) give
    nothing; a ``data:`` that is not a JSON object is a ``ProtocolError``."""

    _buffer: bytes = b""
    last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._buffer += chunk.replace(b"\r\n", b"\n")
        messages = []
        while b"\n\n" in self._buffer:
            frame, self._buffer = self._buffer.split(b"\n\n", 1)
            data = []
            for line in frame.decode("utf-8", errors="replace").split("\n"):
                if line.startswith("id:"):
                    self.last_event_id = line[3:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
            text = "\n".join(data)
            if text.strip():
                messages.append(parse_message(text))
        return messages


def parse_message(text: str | bytes) -> dict[str, Any]:
    try:
        message = json.loads(text)
    except ValueError:
        raise ProtocolError("the server sent something that is not JSON") from None
    if not isinstance(message, dict):
        raise ProtocolError("the server sent JSON that is not a JSON-RPC message")
    return message


def kind_of(message: Mapping[str, Any]) -> str:
    """``request`` (a server pushed one), ``notification``, or ``response``."""
    if "method" in message:
        return "request" if "id" in message else "notification"
    return "response"


def result_of(response: Mapping[str, Any]) -> dict[str, Any]:
    """The result of a response; its error raised as ``ServerError``."""
    if "error" in response:
        error = response["error"]
        raise ServerError(error if isinstance(error, Mapping) else {"message": str(error)})
    result = response.get("result")
    if not isinstance(result, dict):
        raise ProtocolError("the server answered a response without a result object")
    return result


def era_from_discover(status: int, response: Mapping[str, Any] | None) -> Era:
    """Which era the answer to a 2026-07-28 ``server/discover`` shows. A ``DiscoverResult``
    naming 2026-07-28, or -32022 naming it among the supported versions, is the new era;
    anything else (an older server's -32600/-32601/-32602, a 400 without a body) falls back
    to ``initialize`` (wire §14, backward compatibility)."""
    if response is None:
        return Era.LEGACY
    result = response.get("result")
    if isinstance(result, Mapping):
        versions = result.get("supportedVersions")
        if isinstance(versions, list) and PROTOCOL_VERSION in versions:
            return Era.MODERN
        return Era.LEGACY
    error = response.get("error")
    if isinstance(error, Mapping) and error.get("code") == UNSUPPORTED_VERSION:
        data = error.get("data")
        supported = data.get("supported") if isinstance(data, Mapping) else None
        if isinstance(supported, list) and PROTOCOL_VERSION in supported:
            return Era.MODERN
    return Era.LEGACY


@dataclass
class Progress:
    """One progress or log notification, as a line for a person."""

    text: str


def describe_notification(message: Mapping[str, Any]) -> Progress | None:
    """A progress (``notifications/progress``) or log (``notifications/message``) line;
    None for a notification a person need not see."""
    params = message.get("params") or {}
    if message.get("method") == "notifications/progress":
        done, total = params.get("progress"), params.get("total")
        text = f"progress {done}" + (f"/{total}" if total is not None else "")
        if params.get("message"):
            text += f": {params['message']}"
        return Progress(text)
    if message.get("method") == "notifications/message":
        data = params.get("data")
        shown = data if isinstance(data, str) else json.dumps(data)
        return Progress(f"log {params.get('level', 'info')}: {shown}")
    return None


@dataclass
class TaskView:
    """What ``tasks/get`` (or a ``CreateTaskResult``) says about a task."""

    task_id: str
    status: str
    status_message: str | None = None
    poll_ms: int | None = None
    input_requests: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


def task_view(result: Mapping[str, Any]) -> TaskView:
    task_id, status = result.get("taskId"), result.get("status")
    if not isinstance(task_id, str) or not isinstance(status, str):
        raise ProtocolError("the server answered a task without taskId and status")
    poll = result.get("pollIntervalMs")
    requests = result.get("inputRequests")
    inner, error = result.get("result"), result.get("error")
    return TaskView(
        task_id=task_id,
        status=status,
        status_message=result.get("statusMessage")
        if isinstance(result.get("statusMessage"), str)
        else None,
        poll_ms=poll if isinstance(poll, int) and not isinstance(poll, bool) else None,
        input_requests=dict(requests) if isinstance(requests, Mapping) else {},
        result=dict(inner) if isinstance(inner, Mapping) else None,
        error=dict(error) if isinstance(error, Mapping) else None,
    )


def poll_seconds(view: TaskView, *, least: float = 0.05, most: float = 5.0) -> float:
    """How long to wait before the next ``tasks/get``: the server's ``pollIntervalMs``,
    kept between ``least`` and ``most`` (a server cannot make the client spin or stall)."""
    wanted = view.poll_ms / 1000 if view.poll_ms is not None else 0.5
    return min(max(wanted, least), most)


def retry_params(
    params: Mapping[str, Any], result: Mapping[str, Any], responses: Mapping[str, Any]
) -> dict[str, Any]:
    """The params of an MRTR retry: the original ones, the answers, and the server's
    ``requestState`` echoed exactly (wire §10.3)."""
    retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    retry["inputResponses"] = dict(responses)
    if "requestState" in result:
        retry["requestState"] = result["requestState"]
    return retry
