"""orjson reads and writes JSON where it agrees with the standard library, which decides the rest.

``decode_json`` and ``encode`` take orjson's path first; ``_decode_strictly`` and
``_encode_strictly`` are the standard library's, the reference. Whatever the input, both
paths must end the same way: the same value (types, signs and order included) or the same
refusal with the same message.
"""

from __future__ import annotations

import datetime
import enum
import json
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from presa_trio._protocol.jsonrpc import (
    _LARGE,
    MAX_JSON_DEPTH,
    _decode_strictly,
    _encode_strictly,
    decode_json,
    encode,
    to_json,
)
from presa_trio.errors import ParseError


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


FUZZ = settings(max_examples=400, deadline=None, database=None)

# Text with every kind of character, lone surrogates and controls included.
ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: beyond 64 bits too
    | st.floats()  # NaN and the infinities too
    | ANY_TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=20,
)


def tagged(value: Any) -> Any:
    """``value`` with every scalar tagged by its type (``1``, ``1.0`` and ``True`` differ;
    ``-0.0`` keeps its sign) and every object as its items in order."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, list):
        return [tagged(item) for item in value]
    assert isinstance(value, dict)
    return [(key, tagged(item)) for key, item in value.items()]


def read(decode: Any, body: bytes) -> Any:
    try:
        return "value", tagged(decode(body))
    except ParseError as refused:
        return "refused", refused.message


def write(encode_: Any, value: Any) -> Any:
    try:
        data = encode_(value)
    except (ValueError, UnicodeEncodeError, TypeError, RecursionError) as refused:
        return "refused", type(refused).__name__
    assert b"\n" not in data  # one message per line
    return "value", tagged(json.loads(data))


def texts_of(value: Any, ensure_ascii: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")


@FUZZ
@given(VALUES, st.booleans())
@example(10**30, True)  # beyond 64 bits: orjson would read it as a float
@example(-(2**63) - 1, True)
@example(2**64 - 1, True)
@example(-0.0, True)
@example(float("nan"), True)
@example(1e308 * 10, True)
@example({"a": 1, "a\ud800": [0.1, 1e-07, 1e16]}, False)
def test_reading_agrees_with_the_standard_library(value: Any, ensure_ascii: bool) -> None:
    body = texts_of(value, ensure_ascii)
    assert read(decode_json, body) == read(_decode_strictly, body)


@FUZZ
@given(VALUES, st.data())
def test_reading_damaged_text_agrees_with_the_standard_library(
    value: Any, data: st.DataObject
) -> None:
    body = bytearray(texts_of(value, data.draw(st.booleans())))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(body)))
        byte = data.draw(st.sampled_from(b'"\\[]{},:-+.0123456789eEtfnu \t\x00\x7f\xc3\xed\xff'))
        if data.draw(st.booleans()) and at < len(body):
            body[at] = byte
        else:
            body.insert(at, byte)
    assert read(decode_json, bytes(body)) == read(_decode_strictly, bytes(body))


@FUZZ
@given(st.binary(max_size=40))
def test_reading_any_bytes_agrees_with_the_standard_library(body: bytes) -> None:
    assert read(decode_json, body) == read(_decode_strictly, body)


def siblings_deep(levels: int) -> bytes:
    """``levels`` of arrays and objects, taking turns, the deepest path running through the
    last of two children at every level but the innermost (the first an empty one)."""
    text = "[1]"
    for level in range(levels - 1):
        text = f"[[],{text}]" if level % 2 else f'{{"e":{{}},"x":{text}}}'
    return text.encode()


@pytest.mark.parametrize(
    ("body", "accepted"),
    [
        (b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH, True),
        (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), False),
        (siblings_deep(MAX_JSON_DEPTH), True),
        (siblings_deep(MAX_JSON_DEPTH + 1), False),
        # many arrays and objects, nested three deep: the count opens a walk, which passes
        (json.dumps([{"id": i, "tags": ["a", [i]]} for i in range(500)]).encode(), True),
        (json.dumps({"s": "[{" * 300, "n": [[1], {"a": [2]}]}).encode(), True),
    ],
    ids=["arrays-at-limit", "arrays-past", "siblings-at-limit", "siblings-past", "wide", "strings"],
)
def test_the_depth_limit_reads_alike_on_both_paths(body: bytes, accepted: bool) -> None:
    """More arrays and objects than the limit, deep or only wide: orjson's path walks the value
    it read, and says what the standard library's says."""
    outcome = read(decode_json, body)
    assert outcome == read(_decode_strictly, body)
    assert outcome[0] == ("value" if accepted else "refused"), outcome


@pytest.mark.parametrize(
    "body",
    [
        b'{"n":12345678901234567890123}',
        b'{"n":-9223372036854775809}',
        b'{"n":18446744073709551616}',
        b'{"s":"1234567890123456789","n":1}',  # a long run in a string: the slow path, same value
    ],
)
def test_integers_beyond_64_bits_are_read_exactly(body: bytes) -> None:
    assert decode_json(body) == json.loads(body)
    assert tagged(decode_json(body)) == tagged(json.loads(body))


@FUZZ
@given(VALUES)
@example({"a": float("nan")})
@example({"a": [float("inf")]})
@example({"a": None, "b": 1.5})
@example({1: "a key that is not a string", None: 2, 2.5: 3, False: 4})
@example({"a": "\ud800"})
@example({"a": 2**64})
@example([1e-07, 1e16, 1.5e300, -0.0, 5e-324])
def test_writing_agrees_with_the_standard_library(value: Any) -> None:
    assert write(encode, value) == write(_encode_strictly, value)


def test_writing_a_cycle_is_refused_as_before() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="Circular reference"):
        encode({"result": cycle})


def test_a_str_subclass_and_an_int_subclass_are_written_as_before() -> None:
    class Name(str):
        pass

    class Count(int):
        pass

    value = {Name("k"): [Name("v"), Count(3)]}
    assert encode(value) == _encode_strictly(value) == b'{"k":["v",3]}'


def test_an_enum_and_a_uuid_are_written_by_their_values_on_both_paths() -> None:
    """orjson writes them natively; the standard library's path writes them the same way, so
    which path writes a value never decides whether it is JSON (documented at ``to_json``)."""
    value = {"color": Color.RED, "id": uuid.UUID(int=1), "nested": [Color.BLUE]}
    written = b'{"color":"red","id":"00000000-0000-0000-0000-000000000001","nested":[2]}'
    assert encode(value) == _encode_strictly(value) == to_json(value) == written


def test_a_message_too_large_for_orjson_s_output_still_writes_a_uuid() -> None:
    """Above ``_LARGE`` the standard library writes the message (see ``encode``): a UUID
    there is written as below it, not refused."""
    value = {"id": uuid.UUID(int=1), "text": "y" * _LARGE}
    data = encode(value)
    assert len(data) > _LARGE
    assert json.loads(data) == {"id": "00000000-0000-0000-0000-000000000001", "text": "y" * _LARGE}


@pytest.mark.parametrize("value", [{"when": datetime.date(2026, 1, 1)}, {"what": object()}])
def test_a_type_neither_path_writes_is_refused_by_both(value: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="is not JSON serializable"):
        to_json(value)
    with pytest.raises(TypeError, match="is not JSON serializable"):
        _encode_strictly(value)


def test_to_json_hands_a_long_text_to_the_standard_library_only_when_asked() -> None:
    """``largest`` is ``encode``'s bound; without it, ``to_json`` keeps orjson's output
    whatever its length (a float keeps orjson's spelling there)."""
    value = {"x": 1e-7, "text": "y" * 100}
    assert to_json(value) == b'{"x":1e-7,"text":"' + b"y" * 100 + b'"}'
    assert to_json(value, largest=50) == b'{"x":1e-07,"text":"' + b"y" * 100 + b'"}'


class Odd(enum.Enum):
    NAN = float("nan")
    DEEP = {"x": [1.0, float("-inf")]}


def test_a_null_is_written_by_orjson_a_nan_beside_it_is_refused(monkeypatch: Any) -> None:
    """orjson writes ``None`` and NaN alike as ``null``: a ``null`` in its output sends the
    value to the standard library only when the value holds NaN or an infinity (also in a
    tuple, or as an enum's value), which that library refuses."""
    rows = [{"id": i, "note": None, "score": i / 2} for i in range(3)]
    written = to_json({"rows": rows, "pair": (None, 1.5), "color": Color.RED})
    assert json.loads(written) == {"rows": rows, "pair": [None, 1.5], "color": "red"}
    for holds in ([None, float("nan")], {"a": None, "t": (1.0, float("inf"))}, [None, Odd.NAN]):
        assert write(to_json, holds) == write(_encode_strictly, holds) == ("refused", "ValueError")
    assert write(to_json, [None, Odd.DEEP]) == ("refused", "ValueError")

    def standard_library(value: Any) -> bytes:
        raise AssertionError(f"the standard library was asked to write {value!r}")

    monkeypatch.setattr("presa_trio._protocol.jsonrpc._encode_strictly", standard_library)
    assert to_json({"rows": rows}) == orjson.dumps({"rows": rows})  # orjson's, kept
