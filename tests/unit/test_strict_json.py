"""Strict JSON at the envelope: lone surrogates, NaN/Infinity and deep nesting are parse errors.

``decode_json``/``parse_message`` are the one place every transport reads JSON; whatever they
accept must be something every validator, handler and the encoder can handle.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presa_trio._protocol.jsonrpc import (
    MAX_JSON_DEPTH,
    EnvelopeError,
    Request,
    decode_json,
    encode,
    parse_message,
    result_message,
)
from presa_trio.errors import ParseError

HEAD = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'


def message_text(params: str = "{}", *, request_id: str = "1", method: str = '"m"') -> str:
    return f'{{"jsonrpc":"2.0","id":{request_id},"method":{method},"params":{params}}}'


def expect_parse_error(body: bytes | str) -> EnvelopeError:
    with pytest.raises(EnvelopeError) as caught:
        parse_message(body)
    error = caught.value
    assert isinstance(error.error, ParseError)
    assert error.error.code == -32700
    assert error.error.http_status == 400
    assert error.request_id is None
    return error


def nested(levels: int, leaf: str = "0") -> str:
    """``levels`` nested arrays around ``leaf``, as JSON text (no recursion needed)."""
    return "[" * levels + leaf + "]" * levels


# --------------------------------------------------------------------------- lone surrogates


@pytest.mark.parametrize(
    "body",
    [
        message_text(request_id='"\\ud800"'),
        message_text(request_id='"\\udc00"'),
        message_text(method='"tools/\\ud800call"'),
        message_text(method='"\\uDBFF"'),
        message_text('{"\\ud800":1}'),
        message_text('{"a":{"b":[1,{"c":["ok","x\\udc00y"]}]}}'),
        message_text('{"arguments":{"k":"\\ud800\\u0041"}}'),  # high, then not a low
        message_text('{"arguments":{"k":"\\ud800\\ud800"}}'),  # high, then another high
        message_text('{"arguments":{"k":"\\udc00\\ud800"}}'),  # a pair in the wrong order
        message_text('{"arguments":{"k":"\\ud83d"}}'),  # half of an emoji, at the end
    ],
)
def test_lone_surrogate_escapes_are_parse_errors(body: str) -> None:
    expect_parse_error(body)
    expect_parse_error(body.encode())
    with pytest.raises(ParseError):
        decode_json(body)


def test_a_lone_surrogate_in_the_id_loses_the_id() -> None:
    # The id cannot be echoed (it is not a string the encoder could write): no id at all.
    error = expect_parse_error(message_text(request_id='"\\ud800"'))
    assert error.request_id is None
    assert error.error.message.startswith("Parse error")


def test_a_valid_escaped_pair_is_accepted() -> None:
    message = parse_message(
        message_text('{"text":"\\ud83d\\ude00"}', request_id='"\\ud83d\\ude00"')
    )
    assert isinstance(message, Request)
    assert message.id == "\U0001f600"
    assert message.params == {"text": "\U0001f600"}
    assert decode_json('"\\uD83D\\uDE00"') == "\U0001f600"


def test_an_escaped_backslash_before_u_is_not_a_surrogate() -> None:
    # JSON text "\\ud800" is a literal backslash followed by "ud800": six ordinary characters.
    message = parse_message(message_text('{"path":"\\\\ud800","k":"a\\\\udc00"}'))
    assert isinstance(message, Request)
    assert message.params == {"path": "\\ud800", "k": "a\\udc00"}
    assert decode_json('"\\\\ud800"') == "\\ud800"


def test_raw_utf8_surrogate_bytes_are_parse_errors() -> None:
    expect_parse_error(b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"m","params":{}}')
    expect_parse_error(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"k":"\xed\xb0\x80"}}')
    expect_parse_error(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"\xed\xa0\x80":1}}')
    with pytest.raises(ParseError):
        decode_json(b'"\xed\xa0\x80"')


# --------------------------------------------------------------------------- non-finite numbers


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize(
    "template",
    [
        message_text(request_id="@"),
        message_text('{"_meta":{"progressToken":@}}'),
        message_text('{"_meta":{"x":[1,@]}}'),
        message_text('{"arguments":{"deep":[1,[2,{"x":@}]]}}'),
        message_text('{"arguments":[@]}'),
        message_text('{"arguments":{"n":1.5}}')[:-1] + ',"extra":@}',
    ],
)
def test_non_finite_numbers_are_parse_errors(constant: str, template: str) -> None:
    body = template.replace("@", constant)
    expect_parse_error(body)
    expect_parse_error(body.encode())
    # the same text with a finite number in its place is fine
    assert isinstance(parse_message(template.replace("@", "1")), Request)


def test_non_finite_numbers_as_a_bare_value() -> None:
    for constant in ("NaN", "Infinity", "-Infinity", "[NaN]", '{"a":-Infinity}'):
        with pytest.raises(ParseError):
            decode_json(constant)
    assert decode_json("1e308") == 1e308  # large but finite is fine


@pytest.mark.parametrize(
    "number",
    [
        "1e400",
        "-1e400",
        "1.0e999",
        "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792.0",
    ],
)
def test_a_number_that_overflows_a_double_is_a_parse_error(number: str) -> None:
    with pytest.raises(ParseError, match=r"^Parse error: body is not valid JSON$"):
        decode_json(f'{{"a":[{number}]}}')
    expect_parse_error(message_text('{"arguments":{"n":@}}').replace("@", number))
    assert decode_json("1e-400") == 0.0  # underflow is a finite zero, as in every parser


# --------------------------------------------------------------------------- depth


def test_max_depth_levels_are_accepted_one_more_is_not() -> None:
    # The message object is level 1; params, the outermost array, is level 2.
    at_limit = message_text(nested(MAX_JSON_DEPTH - 1))
    message = parse_message(at_limit)
    assert isinstance(message, Request)
    assert depth_of({"params": message.params}) == MAX_JSON_DEPTH
    expect_parse_error(message_text(nested(MAX_JSON_DEPTH)))
    objects = '{"a":' * (MAX_JSON_DEPTH - 1) + "1" + "}" * (MAX_JSON_DEPTH - 1)
    assert isinstance(parse_message(message_text(objects)), Request)
    expect_parse_error(message_text('{"a":' + objects + "}"))


def test_depth_counts_objects_and_arrays_alike() -> None:
    assert decode_json(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(ParseError):
        decode_json(nested(MAX_JSON_DEPTH + 1))
    objects = '{"a":' * MAX_JSON_DEPTH + "1" + "}" * MAX_JSON_DEPTH
    assert isinstance(decode_json(objects), dict)
    with pytest.raises(ParseError):
        decode_json('{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1))


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    body = message_text('{"arguments":{"s":"' + "[{" * 500 + '"}}')
    message = parse_message(body)
    assert isinstance(message, Request)
    assert message.params["arguments"]["s"] == "[{" * 500


def test_deep_nesting_inside_arguments() -> None:
    # message(1) > params(2) > arguments(3) > x's arrays(4...)
    fits = MAX_JSON_DEPTH - 3
    ok = parse_message(message_text('{"name":"t","arguments":{"x":' + nested(fits) + "}}"))
    assert isinstance(ok, Request)
    expect_parse_error(message_text('{"name":"t","arguments":{"x":' + nested(fits + 1) + "}}"))
    expect_parse_error(message_text('{"name":"t","arguments":{"x":' + nested(300) + "}}"))


@pytest.mark.parametrize("levels", [2_000, 20_000])
def test_very_deep_nesting_is_a_parse_error_not_a_recursion_error(levels: int) -> None:
    expect_parse_error(message_text(nested(levels)))
    expect_parse_error(message_text('{"arguments":' + '{"a":' * levels + "1" + "}" * levels + "}"))
    with pytest.raises(ParseError):
        decode_json(nested(levels).encode())


# --------------------------------------------------------------------------- property


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values, ascii_only=st.booleans())
def test_json_values_round_trip(value: Any, ascii_only: bool) -> None:
    assert depth_of(value) <= MAX_JSON_DEPTH
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert decode_json(text) == value
    assert decode_json(text.encode("utf-8")) == value


@settings(max_examples=300, deadline=None)
@given(value=json_values, request_id=st.integers(0, 2**31) | st.text())
def test_parsed_messages_encode_to_valid_utf8(value: Any, request_id: int | str) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"v": value}}
    )
    message = parse_message(body)
    assert isinstance(message, Request)
    assert message.id == request_id and message.params == {"v": value}
    data = encode(result_message(message.id, {"echo": message.params}))
    text = data.decode("utf-8")  # strict: raises on anything that is not UTF-8
    assert "\n" not in text
    assert json.loads(text) == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"echo": {"v": value}},
    }
    # and what the encoder wrote parses again under the same strict rules
    assert decode_json(data) == json.loads(text)


def test_head_constant_is_a_valid_prefix() -> None:
    # guards the helpers above: a plain message parses
    message = parse_message(HEAD + "{}}")
    assert isinstance(message, Request) and message.method == "tools/call"
