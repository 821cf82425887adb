"""Unit tests for presa_trio._protocol.jsonrpc: envelope parsing, encoding and message builders."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presa_trio._protocol.jsonrpc import (
    EnvelopeError,
    Notification,
    Request,
    encode,
    error_message,
    is_request_id,
    message_from_obj,
    notification_message,
    parse_message,
    result_message,
)
from presa_trio.errors import InvalidParams, InvalidRequest, McpError, ParseError

FUZZ = settings(max_examples=300, deadline=None, database=None)


def envelope_error(body: bytes | str) -> EnvelopeError:
    with pytest.raises(EnvelopeError) as caught:
        parse_message(body)
    return caught.value


def dumps(obj: object) -> bytes:
    return json.dumps(obj).encode()


# --- parse errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"not json", b'{"jsonrpc": "2.0",}', b"\xff\xfe\x00", b"\x80", "{'a': 1}"],
)
def test_invalid_json_is_a_parse_error_without_id(body: bytes | str) -> None:
    err = envelope_error(body)
    assert isinstance(err.error, ParseError)
    assert err.error.code == -32700
    assert err.error.http_status == 400
    assert err.request_id is None


@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_deeply_nested_json_is_an_envelope_error(opener: bytes) -> None:
    # json.loads raises RecursionError (not ValueError) past the interpreter's depth limit.
    err = envelope_error(opener * 100_000)
    assert isinstance(err.error, ParseError)
    assert err.error.code == -32700
    assert err.request_id is None


# --- invalid requests -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]',
        b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]',
    ],
)
def test_batches_are_invalid_requests(body: bytes) -> None:
    err = envelope_error(body)
    assert isinstance(err.error, InvalidRequest)
    assert err.error.code == -32600
    assert err.error.http_status == 400
    assert err.request_id is None


@pytest.mark.parametrize("body", [b"1", b"1.5", b'"text"', b"true", b"null"])
def test_non_objects_are_invalid_requests(body: bytes) -> None:
    err = envelope_error(body)
    assert err.error.code == -32600
    assert err.request_id is None


@pytest.mark.parametrize("request_id", [7, 0, -3, "abc", ""])
@pytest.mark.parametrize("jsonrpc", [None, "1.0", "2", 2.0, "2.0 "])
def test_wrong_jsonrpc_echoes_a_valid_id(jsonrpc: object, request_id: int | str) -> None:
    obj: dict[str, Any] = {"id": request_id, "method": "tools/list"}
    if jsonrpc is not None:
        obj["jsonrpc"] = jsonrpc
    err = envelope_error(dumps(obj))
    assert err.error.code == -32600
    assert err.request_id == request_id
    assert type(err.request_id) is type(request_id)


@pytest.mark.parametrize("request_id", [None, 1.5, 1.0, True, False, {"a": 1}, [1]])
def test_wrong_jsonrpc_with_unusable_id_has_no_id(request_id: object) -> None:
    err = envelope_error(dumps({"jsonrpc": "1.0", "id": request_id, "method": "x"}))
    assert err.error.code == -32600
    assert err.request_id is None


@pytest.mark.parametrize(
    "obj",
    [
        {"jsonrpc": "2.0", "id": 3, "result": {}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}},
        {"jsonrpc": "2.0", "id": 3, "result": None},
    ],
)
def test_client_sent_responses_are_invalid_requests(obj: dict[str, Any]) -> None:
    err = envelope_error(dumps(obj))
    assert err.error.code == -32600
    assert err.request_id == 3


@pytest.mark.parametrize("method", ["<missing>", None, 5, "", ["tools/list"], {"m": 1}, True])
def test_method_must_be_a_non_empty_string(method: object) -> None:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "id": "r1"}
    if method != "<missing>":
        obj["method"] = method
    err = envelope_error(dumps(obj))
    assert err.error.code == -32600
    assert err.request_id == "r1"


@pytest.mark.parametrize("method", [None, 5, ""])
def test_bad_method_on_a_notification_is_invalid(method: object) -> None:
    err = envelope_error(dumps({"jsonrpc": "2.0", "method": method}))
    assert err.error.code == -32600
    assert err.request_id is None


@pytest.mark.parametrize("raw_id", ["null", "1.5", "1.0", "1e3", "true", "false", '{"a":1}', "[1]"])
def test_unusable_ids_are_invalid_requests_without_id(raw_id: str) -> None:
    body = '{"jsonrpc":"2.0","id":' + raw_id + ',"method":"tools/list"}'
    err = envelope_error(body.encode())
    assert isinstance(err.error, InvalidRequest)
    assert err.error.code == -32600
    assert err.request_id is None


# --- accepted messages ----------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [0, 1, -1, 2**63, "", "abc", "1"])
def test_requests_keep_id_method_and_params(request_id: int | str) -> None:
    params = {"_meta": {"k": "v"}, "name": "echo"}
    message = parse_message(
        dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
    )
    assert message == Request(request_id, "tools/call", params)
    assert type(message.id) is type(request_id)


def test_request_without_params_has_none() -> None:
    assert parse_message(b'{"jsonrpc":"2.0","id":1,"method":"ping"}') == Request(1, "ping", None)


def test_params_are_passed_through_as_sent() -> None:
    # The envelope does not judge params; the dialect does.
    message = parse_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}')
    assert message == Request(1, "m", [1, 2])


def test_no_id_key_is_a_notification() -> None:
    message = parse_message(
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}'
    )
    assert message == Notification("notifications/cancelled", {"requestId": 1})
    assert not isinstance(message, Request)


def test_notification_without_params() -> None:
    assert parse_message(b'{"jsonrpc":"2.0","method":"n"}') == Notification("n", None)


def test_str_bodies_and_utf8_bytes_parse_alike() -> None:
    text = '{"jsonrpc":"2.0","id":"é","method":"tools/call","params":{"name":"ü"}}'
    assert (
        parse_message(text)
        == parse_message(text.encode())
        == Request("é", "tools/call", {"name": "ü"})
    )


def test_message_from_obj_matches_parse_message() -> None:
    obj = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}
    assert message_from_obj(obj) == parse_message(dumps(obj))


def test_envelope_error_carries_the_message() -> None:
    err = envelope_error(b"[]")
    assert str(err) == err.error.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, True), (0, True), ("", True), ("x", True), (True, False), (1.0, False), (None, False)],
)
def test_is_request_id(value: object, expected: bool) -> None:
    assert is_request_id(value) is expected


# --- encode and builders --------------------------------------------------------------------


def test_encode_is_compact() -> None:
    assert encode({"a": 1, "b": [1, 2], "c": {"d": None}}) == b'{"a":1,"b":[1,2],"c":{"d":null}}'


def test_encode_escapes_newlines_and_keeps_utf8() -> None:
    data = encode({"text": "line1\nline2\r\nend", "name": "héllo ☃ 日本"})
    assert b"\n" not in data
    assert b"\r" not in data
    assert b"\\n" in data
    assert "héllo ☃ 日本".encode() in data
    assert json.loads(data) == {"text": "line1\nline2\r\nend", "name": "héllo ☃ 日本"}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_encode_refuses_non_json_numbers(value: float) -> None:
    with pytest.raises(ValueError):
        encode({"x": value})


def test_result_message() -> None:
    assert result_message("r", {"a": 1}) == {"jsonrpc": "2.0", "id": "r", "result": {"a": 1}}


def test_error_message_without_id_has_no_id_key() -> None:
    message = error_message(None, InvalidRequest("bad"))
    assert message == {"jsonrpc": "2.0", "error": {"code": -32600, "message": "bad"}}
    assert "id" not in message
    assert b'"id"' not in encode(message)


@pytest.mark.parametrize("request_id", [0, 5, "", "abc"])
def test_error_message_with_id(request_id: int | str) -> None:
    message = error_message(request_id, InvalidParams("nope", {"field": "x"}))
    assert message == {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32602, "message": "nope", "data": {"field": "x"}},
    }


def test_notification_message() -> None:
    assert notification_message("n", None) == {"jsonrpc": "2.0", "method": "n"}
    assert notification_message("n", {"a": 1}) == {
        "jsonrpc": "2.0",
        "method": "n",
        "params": {"a": 1},
    }


# --- fuzz -----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)

envelope_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
        "id": st.integers() | st.text(max_size=5) | json_values,
        "method": st.sampled_from(["tools/call", ""]) | json_values,
        "params": json_values,
        "result": json_values,
        "error": json_values,
    },
)


def _check_parse(body: bytes | str) -> None:
    try:
        message = parse_message(body)
    except EnvelopeError as err:
        assert isinstance(err.error, McpError)
        assert err.error.code in (-32700, -32600)
        assert err.request_id is None or is_request_id(err.request_id)
        return
    assert isinstance(message, Request | Notification)
    assert isinstance(message.method, str)
    assert message.method
    if isinstance(message, Request):
        assert is_request_id(message.id)


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_arbitrary_bytes(body: bytes) -> None:
    _check_parse(body)


@FUZZ
@given(st.text(max_size=200))
def test_fuzz_arbitrary_text(body: str) -> None:
    _check_parse(body)


@FUZZ
@given(json_values)
def test_fuzz_arbitrary_json_values(value: object) -> None:
    _check_parse(json.dumps(value))


@FUZZ
@given(envelope_like)
def test_fuzz_envelope_like_objects(obj: dict[str, Any]) -> None:
    _check_parse(json.dumps(obj).encode())
