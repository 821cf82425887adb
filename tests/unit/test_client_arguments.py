"""``KEY=VALUE`` typed by a tool's input schema (presa_trio/_client/arguments.py)."""

from __future__ import annotations

from typing import Any

import pytest

from presa_trio._client.arguments import ArgumentError, parse_json_object, parse_pairs, type_label

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "x": {"type": "number"},
        "on": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object"},
        "name": {"type": "string"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "either": {"type": ["string", "integer"]},
        "color": {"enum": ["red", "blue"]},
        "free": {},
    },
}


@pytest.mark.parametrize(
    ("pair", "value"),
    [
        ("n=3", 3),
        ("n=-7", -7),
        ("x=2", 2),
        ("x=2.5", 2.5),
        ("x=1e3", 1000.0),
        ("on=true", True),
        ("on=No", False),
        ('tags=["a", "b"]', ["a", "b"]),
        ('extra={"k": 1}', {"k": 1}),
        ("name=007", "007"),
        ("name=", ""),
        ("name=a=b", "a=b"),
        ("maybe=null", None),
        ("maybe=4", 4),
        ("either=4", 4),
        ("either=four", "four"),
        ("color=red", "red"),
        ("free=[1]", [1]),
        ("free=text", "text"),
    ],
)
def test_each_value_takes_its_schema_type(pair: str, value: Any) -> None:
    parsed = parse_pairs([pair], SCHEMA)
    assert parsed == {pair.partition("=")[0]: value}
    assert type(next(iter(parsed.values()))) is type(value)


@pytest.mark.parametrize(
    ("pair", "reason"),
    [
        ("n=3.5", "n='3.5': expected integer"),
        ("x=nan", "x='nan': expected number"),
        ("on=maybe", "on='maybe': expected boolean"),
        ("tags={}", "tags='{}': expected array"),
        ("maybe=x", "maybe='x': expected null or integer"),
        ("nope=1", "the tool takes no argument 'nope' (it takes: color, either, extra, free, "),
        ("n", "expected KEY=VALUE, got 'n'"),
        ("=1", "expected KEY=VALUE, got '=1'"),
    ],
)
def test_a_value_that_does_not_fit_is_refused_with_its_reason(pair: str, reason: str) -> None:
    with pytest.raises(ArgumentError) as raised:
        parse_pairs([pair], SCHEMA)
    assert str(raised.value).startswith(reason)


def test_pairs_override_the_args_object_and_an_open_schema_takes_any_key() -> None:
    assert parse_pairs(["n=2"], SCHEMA, {"n": 1, "name": "a"}) == {"n": 2, "name": "a"}
    assert parse_pairs(["k=1"], {"type": "object", "additionalProperties": True}) == {"k": 1}
    typed = {"properties": {"a": {}}, "additionalProperties": {"type": "string"}}
    assert parse_pairs(["a=1", "k=1"], typed) == {"a": 1, "k": "1"}
    with pytest.raises(ArgumentError):
        parse_pairs(["k=1"], {"type": "object"})


def test_args_must_be_a_json_object() -> None:
    assert parse_json_object('{"a": 1}', "--args") == {"a": 1}
    for text, reason in [("[1]", "--args must be a JSON object"), ("{", "--args is not JSON")]:
        with pytest.raises(ArgumentError) as raised:
            parse_json_object(text, "--args")
        assert str(raised.value).startswith(reason)


def test_type_labels_name_every_type_a_property_takes() -> None:
    labels = {name: type_label(prop) for name, prop in SCHEMA["properties"].items()}
    assert labels["maybe"] == "null|integer"
    assert labels["either"] == "integer|string"
    assert labels["color"] == "string"
    assert labels["free"] == "any"
