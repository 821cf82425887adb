"""JSON-RPC 2.0 envelopes: bytes to a typed message, and messages back to compact bytes.

It checks the envelope only (wire §3.1); method params are the dialect's and the schema's
business. No batches: a JSON array is an invalid request (wire §13.7). What counts as JSON is
strict here, once, for every transport: UTF-8 only (no encoded surrogates), no lone surrogate
escapes (RFC 8259 §8.2, I-JSON), no ``NaN``/``Infinity``, and at most ``MAX_JSON_DEPTH``
levels of nesting, so nothing downstream (validators, handlers, the encoder) meets a value it
cannot handle.
"""

from __future__ import annotations

import enum
import json
import math
import re
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import InvalidRequest, McpError, ParseError

RequestId = int | str

#: The deepest nesting of arrays and objects a message may have, the message object itself
#: counting as level 1. Deeper is a parse error (-32700): the same limit for every tool,
#: checked once, well inside what every validator and the encoder handle.
MAX_JSON_DEPTH = 128


def _as_orjson_writes(value: object) -> object:
    """What orjson writes for the two types it knows and the standard library does not: an
    ``Enum`` by its value, a ``UUID`` as its text. Any other unknown type is refused."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_encoder = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_as_orjson_writes
)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass(slots=True)
class Request:
    id: RequestId
    method: str
    params: Any  # as sent; the dialect insists on an object with _meta


@dataclass(slots=True)
class Notification:
    method: str
    params: Any


@dataclass(slots=True)
class Response:
    """A client's answer to a request the server sent it (the older era's sampling,
    elicitation and roots requests): ``result``, or ``error`` (a JSON-RPC error object)."""

    id: RequestId
    result: Any
    error: Any


class EnvelopeError(Exception):
    """A message that cannot be served, with the request id when it could be read."""

    def __init__(self, error: McpError, request_id: RequestId | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id


def is_request_id(value: object) -> bool:
    return (type(value) is int) or isinstance(value, str)


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _finite(number: str) -> float:
    """A JSON number as a float; one too large for a double (``1e400``) has no JSON
    encoding to answer with, so it is refused here rather than read as infinity."""
    value = float(number)
    if math.isinf(value):
        raise ValueError(f"{number} is out of range")
    return value


_decoder = json.JSONDecoder(parse_constant=_not_json, parse_float=_finite)  # made once


# The body's shape, for the two things orjson is not trusted with: every digit reads as 0
# and every opening brace as an opening bracket, so one pass finds a run of 19 digits (the
# shortest integer beyond 64 bits) and counts the arrays and objects that open (a message
# nests no deeper than that count).
_SHAPE = bytes.maketrans(b"123456789{", b"000000000[")
_LONG_DIGITS = b"0" * 19


def decode_json(body: bytes | str) -> object:
    """The JSON value of ``body``, or ``ParseError``: strict UTF-8, no lone surrogates, no
    ``NaN``/``Infinity`` (nor a number that overflows to it), nesting within
    ``MAX_JSON_DEPTH``.

    orjson reads it wherever the two agree (the benchmark request in 2.3 us, checks
    included, instead of 4.0): orjson refuses everything the standard library's path below
    refuses, and then that path decides, with its own messages. orjson reads an integer
    beyond 64 bits as a float, so a body with a run of 19 digits takes that path too."""
    if isinstance(body, bytes):
        # ``find``, not ``in``: CPython 3.11 tries the operand of ``in`` on bytes as an
        # integer first, and makes and drops a TypeError with its message on every call.
        shape = body.translate(_SHAPE)
        if shape.find(_LONG_DIGITS) < 0:
            opened = shape.count(b"[")
            del shape  # a copy of the body: not kept while orjson reads it
            try:
                value = orjson.loads(body)
            except orjson.JSONDecodeError:
                pass  # the path below says what is wrong
            else:
                if opened > MAX_JSON_DEPTH:
                    _check_depth(value)
                return value
    return _decode_strictly(body)


def _decode_strictly(body: bytes | str) -> object:
    """``decode_json`` with the standard library alone: the reference orjson agrees with."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes | bytearray) else body
        value = _decoder.decode(text)
    except (ValueError, UnicodeDecodeError):
        raise ParseError("Parse error: body is not valid JSON") from None
    except RecursionError:
        raise ParseError("Parse error: JSON nested too deeply") from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        _check_depth(value)
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        raise ParseError("Parse error: a string holds an unpaired surrogate")
    return value


def _check_depth(value: object) -> None:
    if _depth(value) > MAX_JSON_DEPTH:
        raise ParseError(f"Parse error: JSON nested deeper than {MAX_JSON_DEPTH} levels")


def _depth(value: object) -> int:
    """How deeply arrays and objects nest in ``value`` (0 for a scalar), one level at a
    time, looking no deeper than one level past ``MAX_JSON_DEPTH``. ``value`` is what a
    JSON parser made: its arrays and objects are plain lists and dicts."""
    depth = 0
    level = [value]
    while depth <= MAX_JSON_DEPTH:
        nested = [node for node in level if type(node) is dict or type(node) is list]
        if not nested:
            break
        depth += 1
        level = []
        for node in nested:
            level.extend(node.values() if type(node) is dict else node)
    return depth


def _has_lone_surrogate(value: object) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            texts = [node]
        elif isinstance(node, dict):
            texts = list(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
            continue
        else:
            continue
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def parse_message(body: bytes | str) -> Request | Notification:
    """Decode one client message; raise ``EnvelopeError`` for anything else."""
    message = parse_any(body)
    if isinstance(message, Response):
        raise EnvelopeError(_NO_RESPONSES, message.id)
    return message


def parse_any(body: bytes | str) -> Request | Notification | Response:
    """Decode one client message, a response included (an older-era session may answer
    what the server asked); raise ``EnvelopeError`` for anything else."""
    try:
        obj = decode_json(body)
    except ParseError as error:
        raise EnvelopeError(error) from None
    return message_from_obj(obj, responses=True)


_NO_RESPONSES = InvalidRequest("Invalid request: clients must not send responses")


def message_from_obj(obj: object, *, responses: bool = False) -> Request | Notification | Response:
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
        if not responses:
            raise EnvelopeError(_NO_RESPONSES, request_id)
        return _response(obj, request_id)
    if not isinstance(method, str) or not method:
        raise EnvelopeError(InvalidRequest("Invalid request: method must be a string"), request_id)
    if "id" not in obj:
        return Notification(method, obj.get("params"))
    if request_id is None:
        raise EnvelopeError(InvalidRequest("Invalid request: id must be a string or an integer"))
    return Request(request_id, method, obj.get("params"))


def _response(obj: dict[str, Any], request_id: RequestId | None) -> Response:
    result, error = obj.get("result"), obj.get("error")
    if request_id is None:
        raise EnvelopeError(InvalidRequest("Invalid request: a response needs its request's id"))
    if ("result" in obj) == ("error" in obj):
        raise EnvelopeError(
            InvalidRequest("Invalid request: a response has a result or an error"), request_id
        )
    if "result" in obj and not isinstance(result, dict):
        raise EnvelopeError(InvalidRequest("Invalid request: result must be an object"), request_id)
    if "error" in obj and not (
        isinstance(error, dict) and type(error.get("code")) is int and "message" in error
    ):
        raise EnvelopeError(
            InvalidRequest("Invalid request: error must be an object with a code and a message"),
            request_id,
        )
    return Response(request_id, result, error)


#: orjson hands these to its ``default`` (none here: it refuses them), and the standard
#: library's encoder then writes them (a str or int subclass) or refuses them (a date).
_PASS_ON = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME
_PASS_ON |= orjson.OPT_PASSTHROUGH_DATACLASS
_LARGE = 1 << 20  # bytes: a larger message is written by the standard library (see encode)


def to_json(value: Any, largest: int = sys.maxsize) -> bytes:
    """Compact, single-line UTF-8 JSON of ``value``; ``ValueError``, ``UnicodeEncodeError``
    or ``TypeError`` for a value that is not JSON (``NaN``, a lone surrogate, a date).

    orjson writes it wherever the two agree (the benchmark response in 0.8 us instead of
    4.8; the same JSON, though a float may be spelled differently, ``1e-7`` for ``1e-07``).
    What orjson refuses (an integer beyond 64 bits, a key that is not a string, a lone
    surrogate, a cycle, the types passed on above) and what it would write as ``null``
    (``NaN`` and the infinities) the standard library's encoder decides, and so does a text
    longer than ``largest`` bytes (see ``encode``). Both write an ``Enum`` by its value and a
    ``UUID`` as its text: which of them writes a value never decides whether it is JSON."""
    try:
        data = orjson.dumps(value, option=_PASS_ON)
    except orjson.JSONEncodeError:
        return _encode_strictly(value)
    # null: None, or NaN or an infinity, which orjson writes as null where the standard
    # library refuses them (``find``, not ``in``: see ``decode_json``)
    if len(data) > largest or (data.find(b"null") >= 0 and _holds_non_finite(value)):
        return _encode_strictly(value)
    return data


_TEXT_AND_WHOLE = frozenset({str, int, bool, type(None)})  # what holds no float


def _holds_non_finite(value: object) -> bool:
    """Whether ``value``, which orjson has just written, holds NaN or an infinity, one level at
    a time. What orjson writes is plain data (dicts, lists, tuples, floats, texts and the
    like) and enums, by their values; a subclass of a dict, a list, a tuple or a float it
    refuses, and the standard library writes it."""
    level: list[Any] = [value]
    while level:
        deeper: list[Any] = []
        for node in level:
            kind = type(node)
            if kind in _TEXT_AND_WHOLE:
                continue
            if kind is float:
                if not math.isfinite(node):
                    return True
            elif kind is dict:
                deeper.extend(node.values())
            elif kind is list or kind is tuple:
                deeper.extend(node)
            elif isinstance(node, enum.Enum):
                deeper.append(node.value)
        level = deeper
    return False


def encode(message: dict[str, Any]) -> bytes:
    """A message as ``to_json`` writes it (wire §3.1: one message per line).

    A message larger than ``_LARGE`` is written by the standard library: with orjson's
    output, a worker kept a non-reading client's 8 MB answer in its RSS after the client had
    gone (the slow-clients test); with the standard library's it gives it back. At that size
    the encoder's speed no longer matters."""
    return to_json(message, _LARGE)


def _encode_strictly(value: Any) -> bytes:
    """``to_json`` with the standard library alone: the reference orjson agrees with."""
    return _encoder.encode(value).encode()


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
