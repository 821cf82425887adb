"""Unit tests for presa_trio._handlers.convert (and adapt.readable): arguments reach a
handler as the types its parameters are hinted as.

No ``from __future__ import annotations`` here, so hints are the objects written.
"""

import dataclasses
import datetime
import decimal
import enum
import logging
import pathlib
import sys
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import pytest
from pydantic import BaseModel, Field

from presa_trio import Param
from presa_trio._handlers.adapt import adapter_for, readable
from presa_trio._handlers.convert import ArgumentError, Binder
from presa_trio._handlers.typeschema import EMPTY


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Where:
    lat: float
    lon: float
    label: str = ""


class Box(TypedDict):
    color: Color
    size: int
    note: NotRequired[str]


class Plain(TypedDict):
    x: int
    tags: list[str]


class Tree(TypedDict):
    label: str
    children: list["Tree"]


class Order(BaseModel):
    item: str
    qty: int = Field(ge=1)
    when: datetime.datetime | None = None


@dataclasses.dataclass
class Holder:
    where: Plain  # pydantic reads a stdlib TypedDict inside a dataclass only from 3.12


def binder(*params: tuple[str, object] | tuple[str, object, object], **options: Any) -> Binder:
    full = [(p[0], p[1], p[2] if len(p) == 3 else EMPTY) for p in params]
    return Binder(full, **options)


def one(tp: object, value: object) -> object:
    """``value`` for a parameter hinted ``tp``, through a schema-valid call."""
    return binder(("x", tp)).from_json({"x": value})["x"]


UTC = datetime.UTC


@pytest.mark.parametrize(
    ("tp", "sent", "expected"),
    [
        (Where, {"lat": 1, "lon": 2.5}, Where(1.0, 2.5)),
        (Color, "red", Color.RED),
        (Level, 2, Level.HIGH),
        (set[str], ["a", "b"], {"a", "b"}),
        (frozenset[int], [1, 2], frozenset({1, 2})),
        (tuple[str, int], ["a", 1], ("a", 1)),
        (tuple[int, ...], [1, 2, 3], (1, 2, 3)),
        (Order, {"item": "i", "qty": 2}, Order(item="i", qty=2)),
        (
            datetime.datetime,
            "2026-07-28T09:30:00Z",
            datetime.datetime(2026, 7, 28, 9, 30, tzinfo=UTC),
        ),
        (datetime.date, "2026-07-28", datetime.date(2026, 7, 28)),
        (uuid.UUID, "00000000-0000-0000-0000-000000000005", uuid.UUID(int=5)),
        (decimal.Decimal, "1.50", decimal.Decimal("1.50")),
        (decimal.Decimal, 2, decimal.Decimal(2)),
        (pathlib.Path, "/tmp/x", pathlib.Path("/tmp/x")),
        (Literal[Color.RED], "red", Color.RED),
        (Optional[Color], None, None),  # noqa: UP045
        (Color | None, "green", Color.GREEN),
        (int | datetime.date, "2026-07-28", datetime.date(2026, 7, 28)),
        (dict[str, list[Where]], {"k": [{"lat": 0, "lon": 1}]}, {"k": [Where(0.0, 1.0)]}),
        (list[tuple[Color, int]], [["red", 1]], [(Color.RED, 1)]),
        (Box, {"color": "green", "size": 1}, {"color": Color.GREEN, "size": 1}),
        (Annotated[int, Field(ge=1, le=50)], 7, 7),
        (Annotated[Color, Param(description="c")], "red", Color.RED),
    ],
)
def test_each_type_arrives_as_hinted(tp: object, sent: object, expected: object) -> None:
    got = one(tp, sent)
    assert got == expected
    assert type(got) is type(expected)


def test_nested_values_arrive_as_hinted_too() -> None:
    got = one(dict[str, list[Where]], {"k": [{"lat": 0, "lon": 1}]})
    assert isinstance(got, dict)
    assert type(got["k"][0]) is Where
    box = one(Box, {"color": "green", "size": 1})
    assert isinstance(box, dict)
    assert box["color"] is Color.GREEN
    order = one(Order, {"item": "i", "qty": 1, "when": "2026-07-28T00:00:00+02:00"})
    assert isinstance(order, Order)
    assert order.when == datetime.datetime(2026, 7, 27, 22, tzinfo=UTC)


def test_json_values_pass_as_they_are_when_nothing_needs_converting() -> None:
    tags = ["a", "b"]
    plain = binder(("name", str), ("count", int), ("ratio", float), ("tags", list[str]))
    kwargs = plain.from_json({"name": "n", "count": 1, "ratio": 2, "tags": tags})
    assert kwargs == {"name": "n", "count": 1, "ratio": 2, "tags": tags}
    assert type(kwargs["ratio"]) is int  # not converted: an int is a float to a type checker
    assert kwargs["tags"] is tags
    nested = binder(("m", dict[str, Sequence[str] | None]), ("t", Tree), ("f", list[float]))
    t = {"label": "", "children": [{"label": "", "children": []}]}
    assert nested.from_json({"m": {}, "t": t, "f": [1, 2.5]})["t"] is t


def test_an_integral_float_for_an_int_arrives_as_an_int() -> None:
    # 5.0 is an integer to JSON Schema (it passes the inputSchema); to Python it is a float
    top = binder(("n", int), ("m", Optional[int], None), ("s", str))  # noqa: UP045
    kwargs = top.from_json({"n": 5.0, "m": 2.0, "s": "x"})
    assert kwargs == {"n": 5, "m": 2, "s": "x"}
    assert (type(kwargs["n"]), type(kwargs["m"])) == (int, int)
    inner = one(list[int], [1.0, 2])
    assert inner == [1, 2]
    assert isinstance(inner, list)
    assert [type(i) for i in inner] == [int, int]
    point = one(Plain, {"x": 3.0, "tags": []})
    assert isinstance(point, dict)
    assert type(point["x"]) is int


def test_unknown_arguments_are_dropped_by_from_json_and_kept_with_kwargs() -> None:
    assert binder(("a", int)).from_json({"a": 1, "b": 2}) == {"a": 1}
    assert binder(("a", Color), var_keyword=True).from_json({"a": "red", "b": "red"}) == {
        "a": Color.RED,
        "b": "red",
    }


def test_a_value_that_does_not_convert_names_its_field() -> None:
    b = binder(("at", datetime.datetime), ("where", Where), ("color", Color))
    with pytest.raises(ArgumentError) as caught:
        b.from_json({"at": "nope", "where": {"lat": 1}, "color": "blue"})
    assert caught.value.problems == [
        "at: Input should be a valid datetime or date, input is too short",
        "where/lon: Field required",
        "color: Input should be 'red' or 'green'",
    ]
    assert str(caught.value) == "; ".join(caught.value.problems)


def test_a_field_constraint_is_enforced_by_the_conversion() -> None:
    with pytest.raises(ArgumentError) as caught:
        one(Annotated[int, Field(ge=1, le=50)], 51)
    assert caught.value.problems == ["x: Input should be less than or equal to 50"]


# --- the lax second chance -----------------------------------------------------------------


def test_lax_coerces_strings_to_numbers_and_more() -> None:
    b = binder(("n", int), ("r", float), ("ok", bool), ("day", datetime.date), ("k", str, "d"))
    assert b.from_lax_json({"n": "5", "r": "1.5", "ok": "true", "day": "2026-07-28"}) == {
        "n": 5,
        "r": 1.5,
        "ok": True,
        "day": datetime.date(2026, 7, 28),
    }


def test_lax_parses_a_json_text_sent_for_a_list_or_an_object() -> None:
    b = binder(("tags", list[str]), ("where", Where | None), ("name", str))
    got = b.from_lax_json({"tags": '["a", "b"]', "where": '{"lat": 1, "lon": 2}', "name": "[1]"})
    assert got == {"tags": ["a", "b"], "where": Where(1.0, 2.0), "name": "[1]"}
    with pytest.raises(ArgumentError) as caught:
        b.from_lax_json({"tags": "[oops", "name": "n"})
    assert caught.value.problems == ["tags: Input should be a valid list", "where: Field required"]


def test_lax_refuses_unknown_and_missing_arguments() -> None:
    b = binder(("a", int), ("b", int, 2))
    with pytest.raises(ArgumentError) as caught:
        b.from_lax_json({"zzz": 1})
    assert caught.value.problems == [
        "a: Field required",
        "zzz: Extra inputs are not permitted",
    ]
    assert b.from_lax_json({"a": "1"}) == {"a": 1}  # b absent: the function's default applies


def test_to_json_writes_converted_values_back() -> None:
    b = binder(("at", datetime.datetime), ("tags", set[str]), ("amount", decimal.Decimal))
    converted = b.from_lax_json({"at": "2026-07-28T00:00:00Z", "tags": ["a"], "amount": 1.5})
    assert b.to_json(converted) == {
        "at": "2026-07-28T00:00:00Z",
        "tags": ["a"],
        "amount": "1.5",
    }


def test_to_json_writes_a_model_by_alias_as_its_schema_reads_it() -> None:
    class Person(BaseModel):
        full_name: str = Field(alias="fullName")

    b = binder(("who", Person), ("n", int))
    converted = b.from_lax_json({"who": {"fullName": "Ada"}, "n": "1"})
    assert converted == {"who": Person(fullName="Ada"), "n": 1}
    assert b.to_json(converted) == {"who": {"fullName": "Ada"}, "n": 1}


def test_no_parameters_no_adapter() -> None:
    b = binder()
    assert not b.can_convert
    assert b.from_json({"x": 1}) == {}
    with pytest.raises(ArgumentError):
        b.from_lax_json({"x": 1})
    assert b.to_json({}) == {}


# --- strings: prompt arguments and template variables -----------------------------------


def test_from_strings_converts_to_the_hints() -> None:
    b = binder(("count", int), ("day", datetime.date), ("level", Level), ("name", str))
    assert b.from_strings({"count": "5", "day": "2026-07-28", "level": "2", "name": "7"}) == {
        "count": 5,
        "day": datetime.date(2026, 7, 28),
        "level": Level.HIGH,
        "name": "7",
    }
    with pytest.raises(ArgumentError) as caught:
        b.from_strings({"count": "five", "day": "x", "level": "3", "name": "n"})
    assert [p.partition(":")[0] for p in caught.value.problems] == ["count", "day", "level"]


def test_from_strings_leaves_strings_alone_when_they_are_wanted() -> None:
    b = binder(("a", str), ("b", Optional[str], None), ("c", Annotated[str, Param(title="t")]))  # noqa: UP045
    value = "x" * 3
    assert b.from_strings({"a": value, "b": "y", "c": "z", "ignored": "1"})["a"] is value


def test_from_strings_checks_a_literal() -> None:
    b = binder(("mode", Literal["fast", "slow"]))
    assert b.from_strings({"mode": "fast"}) == {"mode": "fast"}
    with pytest.raises(ArgumentError) as caught:
        b.from_strings({"mode": "medium"})
    assert caught.value.problems == ["mode: Input should be 'fast' or 'slow'"]


# --- what pydantic cannot convert ------------------------------------------------------------


def test_a_parameter_pydantic_cannot_convert_passes_as_json(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Opaque:
        pass

    with caplog.at_level(logging.WARNING, logger="presa_trio"):
        b = Binder([("h", Holder, EMPTY), ("o", Opaque, EMPTY), ("n", int, EMPTY)], label="f")
    raw = {"where": {"x": 1, "tags": []}}
    kwargs = b.from_json({"h": raw, "o": {}, "n": 1})
    if sys.version_info < (3, 12):
        assert kwargs["h"] is raw
        assert "parameter 'h' of f is passed unconverted" in caplog.text
    assert kwargs["o"] == {}
    assert "parameter 'o' of f is passed unconverted" in caplog.text
    assert b.from_lax_json({"h": raw, "o": 1, "n": "2"})["n"] == 2  # the others still convert


def test_readable_rebuilds_stdlib_typeddicts_for_pydantic() -> None:
    adapter = adapter_for(list[Box])
    assert adapter.validate_python([{"color": "red", "size": "2"}]) == [
        {"color": Color.RED, "size": 2}
    ]
    assert readable(int) is int
    assert readable(list[int]) == list[int]
    recursive = adapter_for(Tree)  # cut at the inner level: that one stays JSON data
    inner = {"label": "b", "children": [{"label": 3}]}
    assert recursive.validate_python({"label": "a", "children": [inner]}) == {
        "label": "a",
        "children": [inner],
    }
    with pytest.raises(TypeError, match=r"pydantic cannot convert .*Holder"):
        adapter_for(type("Holder", (), {}))


def test_a_literal_of_enum_members_takes_their_values() -> None:
    assert one(Literal[Color.RED, Level.HIGH], "red") is Color.RED
    assert one(Literal[Color.RED, Level.HIGH], 2) is Level.HIGH
    assert one(Literal[Color.RED, "plain"], "plain") == "plain"
    with pytest.raises(ArgumentError):
        one(Literal[Color.RED], "green")
