"""JSON-RPC 2.0 envelopes: bytes to a typed message, and messages back to compact bytes.

It checks the envelope only (wire §3.1); method params are the dialect's and the schema's
business. No batches: a JSON array is an invalid request (wire §13.7).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequest, McpError, ParseError

RequestId = int | str

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass(slots=True)
class Request:
    id: RequestId
    method: str
    params: Any  # as sent; the dialect insists on an object with _meta


@dataclass(slots=True)
class Notification:
    method: str
    params: Any


class EnvelopeError(Exception):
    """A message that cannot be served, with the request id when it could be read."""

    def __init__(self, error: McpError, request_id: RequestId | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id


def is_request_id(value: object) -> bool:
    return (type(value) is int) or isinstance(value, str)


def parse_message(body: bytes | str) -> Request | Notification:
    """Decode one client message; raise ``EnvelopeError`` for anything else."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise EnvelopeError(ParseError("Parse error: body is not valid JSON")) from None
    except RecursionError:
        raise EnvelopeError(ParseError("Parse error: JSON nested too deeply")) from None
    return message_from_obj(obj)


def message_from_obj(obj: object) -> Request | Notification:
    if isinstance(obj, list):
        raise EnvelopeError(InvalidRequest("Invalid request: batches are not supported"))
    if not isinstance(obj, dict):
        raise EnvelopeError(InvalidRequest("Invalid request: message must be a JSON object"))
    raw_id = obj.get("id")
    request_id = raw_id if is_request_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        raise EnvelopeError(InvalidRequest('Invalid request: jsonrpc must be "2.0"'), request_id)
    method = obj.get("method")
    if method is None and ("result" in obj or "error" in obj):
        raise EnvelopeError(
            InvalidRequest("Invalid request: clients must not send responses"), request_id
        )
    if not isinstance(method, str) or not method:
        raise EnvelopeError(InvalidRequest("Invalid request: method must be a string"), request_id)
    if "id" not in obj:
        return Notification(method, obj.get("params"))
    if request_id is None:
        raise EnvelopeError(InvalidRequest("Invalid request: id must be a string or an integer"))
    return Request(request_id, method, obj.get("params"))


def encode(message: dict[str, Any]) -> bytes:
    """Compact, single-line UTF-8 JSON (wire §3.1: one message per line)."""
    return _encoder.encode(message).encode()


def result_message(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId | None, error: McpError) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if request_id is not None:  # never "id": null (wire §3.1, schema RequestId)
        message["id"] = request_id
    message["error"] = error.to_error()
    return message


def notification_message(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message
