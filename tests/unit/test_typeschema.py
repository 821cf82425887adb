"""Unit tests for presa_trio._handlers.typeschema and _signature: exact schemas, validity, samples.

No ``from __future__ import annotations`` here, so quoted hints stay plain strings.
"""

import dataclasses
import datetime
import decimal
import enum
import pathlib
import typing
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Optional, Required, TypedDict

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from presa_trio import Context, ToolResult
from presa_trio._handlers.convert import to_jsonable
from presa_trio._handlers.typeschema import Param, schema_for_type
from presa_trio._kernel.signature import Signature, input_schema_for, output_schema_for

V = jsonschema.Draft202012Validator


def checked(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Assert the schema is valid 2020-12 and hand it back."""
    assert schema is not None
    V.check_schema(schema)
    return schema


def accepts(schema: dict[str, Any], *instances: object) -> None:
    for instance in instances:
        assert V(schema).is_valid(instance), instance


def rejects(schema: dict[str, Any], *instances: object) -> None:
    for instance in instances:
        assert not V(schema).is_valid(instance), instance


# --- types used below (module level so string hints resolve) -------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(TypedDict):
    x: int
    y: int


class Filters(TypedDict, total=False):
    tag: str
    limit: int
    query: Required[str]


class Mixed(TypedDict):
    name: str
    note: NotRequired[str | None]


@dataclasses.dataclass
class Options:
    name: str
    retries: int = 3
    tags: list[str] = dataclasses.field(default_factory=list)
    color: Color = Color.GREEN


@dataclasses.dataclass
class Report:
    title: str
    where: Point
    options: Options | None = None


@dataclasses.dataclass
class Node:
    value: int
    children: list["Node"] = dataclasses.field(default_factory=list)


class Tree(TypedDict):
    label: str
    forest: list["Forest"]


class Forest(TypedDict):
    trees: list[Tree]


class TextContent(TypedDict):
    type: Literal["text"]
    text: str


class Block(TypedDict):
    type: Literal["image", "audio"]
    data: str


class Opaque:
    pass


class Item(BaseModel):
    name: str = Field(description="What")
    qty: int = Field(default=1, ge=1)


class Order(BaseModel):
    items: list[Item]
    when: datetime.datetime | None = None


class Outline(BaseModel):
    label: str
    children: list["Outline"] = []


@dataclasses.dataclass
class Stamp:
    at: datetime.datetime
    amount: decimal.Decimal
    limit: Annotated[int, Field(ge=1, le=50)] = 10


@dataclasses.dataclass
class Chain:
    value: int
    next: "Chain | None" = None


HandChain = Chain
UserId = typing.NewType("UserId", int)
T = typing.TypeVar("T")

# --- schema_for_type: scalars and containers ------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (object, {}),
        (UserId, {"type": "integer"}),
    ],
)
def test_scalars(tp: object, expected: dict[str, Any]) -> None:
    assert checked(schema_for_type(tp)) == expected


def test_bool_is_not_an_integer() -> None:
    rejects(schema_for_type(int), True, 1.5, "1")
    accepts(schema_for_type(int), 1, -7)
    rejects(schema_for_type(bool), 1)
    accepts(schema_for_type(float), 1, 1.5)


@pytest.mark.parametrize(
    "tp",
    [list[int], typing.List[int], Sequence[int], typing.Sequence[int], tuple[int, ...]],  # noqa: UP006
)
def test_homogeneous_arrays(tp: object) -> None:
    schema = checked(schema_for_type(tp))
    assert schema == {"type": "array", "items": {"type": "integer"}}
    accepts(schema, [], [1, 2])
    rejects(schema, [1, "2"], {"a": 1})


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (list, {"type": "array"}),
        (tuple, {"type": "array"}),
        (typing.Tuple, {"type": "array"}),  # noqa: UP006
        (dict, {"type": "object"}),
        (typing.Dict, {"type": "object"}),  # noqa: UP006
        (tuple[()], {"type": "array", "maxItems": 0}),
    ],
)
def test_bare_containers(tp: object, expected: dict[str, Any]) -> None:
    assert checked(schema_for_type(tp)) == expected


def test_fixed_tuple() -> None:
    schema = checked(schema_for_type(tuple[str, int]))
    assert schema == {
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "integer"}],
        "minItems": 2,
        "maxItems": 2,
    }
    accepts(schema, ["a", 1])
    rejects(schema, ["a"], ["a", 1, 2], [1, "a"])


@pytest.mark.parametrize("tp", [set[str], frozenset[str], typing.AbstractSet[str]])
def test_sets(tp: object) -> None:
    schema = checked(schema_for_type(tp))
    assert schema == {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    accepts(schema, ["a", "b"])
    rejects(schema, ["a", "a"])


@pytest.mark.parametrize("tp", [dict[str, float], Mapping[str, float], typing.Dict[str, float]])  # noqa: UP006
def test_string_keyed_mappings(tp: object) -> None:
    schema = checked(schema_for_type(tp))
    assert schema == {"type": "object", "additionalProperties": {"type": "number"}}
    accepts(schema, {}, {"a": 1.5})
    rejects(schema, {"a": "x"})


def test_mapping_with_literal_keys_uses_property_names() -> None:
    schema = checked(schema_for_type(dict[Literal["a", "b"], int]))
    assert schema == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "propertyNames": {"type": "string", "enum": ["a", "b"]},
    }
    accepts(schema, {"a": 1})
    rejects(schema, {"c": 1})


def test_nested_list_of_dicts() -> None:
    schema = checked(schema_for_type(list[dict[str, int]]))
    assert schema == {
        "type": "array",
        "items": {"type": "object", "additionalProperties": {"type": "integer"}},
    }
    accepts(schema, [], [{"a": 1}, {}])
    rejects(schema, [{"a": "1"}], {"a": 1}, [[1]])


# --- unions, literals, enums ----------------------------------------------------------------


@pytest.mark.parametrize("tp", [Optional[int], int | None, typing.Union[int, None]])  # noqa: UP007, UP045
def test_optional(tp: object) -> None:
    schema = checked(schema_for_type(tp))
    assert schema == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    accepts(schema, 1, None)
    rejects(schema, "1")


def test_union() -> None:
    schema = checked(schema_for_type(int | str | None))
    assert schema == {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}
    assert checked(schema_for_type(list[int] | Point)) == {
        "anyOf": [
            {"type": "array", "items": {"type": "integer"}},
            schema_for_type(Point),
        ]
    }


def test_literal() -> None:
    schema = checked(schema_for_type(Literal["a", "b"]))
    assert schema == {"type": "string", "enum": ["a", "b"]}
    accepts(schema, "a")
    rejects(schema, "c", 1)
    assert checked(schema_for_type(Literal[1, 2])) == {"type": "integer", "enum": [1, 2]}
    assert checked(schema_for_type(Literal["a", 1, None])) == {"enum": ["a", 1, None]}
    assert checked(schema_for_type(Literal[True])) == {"type": "boolean", "enum": [True]}
    assert checked(schema_for_type(Literal[Color.RED])) == {"type": "string", "enum": ["red"]}


def test_enums() -> None:
    schema = checked(schema_for_type(Color))
    assert schema == {"type": "string", "enum": ["red", "green"]}
    rejects(schema, "RED")
    assert checked(schema_for_type(Level)) == {"type": "integer", "enum": [1, 2]}


def test_enum_with_non_json_values_is_rejected() -> None:
    class Weird(enum.Enum):
        A = (1, 2)

    with pytest.raises(TypeError, match="Weird"):
        schema_for_type(Weird)


# --- TypedDicts and dataclasses ----------------------------------------------------------


def test_typeddict() -> None:
    schema = checked(schema_for_type(Point))
    assert schema == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    accepts(schema, {"x": 1, "y": 2})
    rejects(schema, {"x": 1}, {"x": 1, "y": 2, "z": 3})


def test_typeddict_total_false_and_qualifiers() -> None:
    schema = checked(schema_for_type(Filters))
    assert schema == {
        "type": "object",
        "properties": {
            "tag": {"type": "string"},
            "limit": {"type": "integer"},
            "query": {"type": "string"},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    accepts(schema, {"query": "q"}, {"query": "q", "limit": 3})
    rejects(schema, {}, {"tag": "t"})
    assert checked(schema_for_type(Mixed)) == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["name"],
        "additionalProperties": False,
    }


def test_typing_extensions_typeddict_and_read_only() -> None:
    import typing_extensions as te

    class Item(te.TypedDict, total=False):
        id: te.Required[te.ReadOnly[int]]
        label: te.NotRequired[str]

    assert checked(schema_for_type(Item)) == {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "label": {"type": "string"}},
        "required": ["id"],
        "additionalProperties": False,
    }


def test_dataclass_with_defaults() -> None:
    schema = checked(schema_for_type(Options))
    assert schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "retries": {"type": "integer", "default": 3},
            "tags": {"type": "array", "items": {"type": "string"}},
            "color": {"type": "string", "enum": ["red", "green"], "default": "green"},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    accepts(schema, {"name": "n"}, {"name": "n", "tags": ["a"], "color": "red"})
    rejects(schema, {"retries": 1}, {"name": "n", "color": "blue"})


def test_nested_objects_are_inlined() -> None:
    schema = checked(schema_for_type(Report))
    assert "$defs" not in schema
    assert schema["properties"]["where"] == schema_for_type(Point)
    assert schema["properties"]["options"] == {
        "anyOf": [schema_for_type(Options), {"type": "null"}],
        "default": None,
    }
    accepts(schema, {"title": "t", "where": {"x": 1, "y": 2}, "options": {"name": "o"}})
    rejects(schema, {"title": "t", "where": {"x": 1}})


def test_recursive_dataclass_uses_defs() -> None:
    schema = checked(schema_for_type(Node))
    body = {
        "type": "object",
        "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
        },
        "required": ["value"],
        "additionalProperties": False,
    }
    assert schema == {**body, "$defs": {"Node": body}}
    accepts(schema, {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]})
    rejects(schema, {"value": 1, "children": [{"value": 2, "children": [{"value": "x"}]}]})


def test_mutually_recursive_typeddicts() -> None:
    schema = checked(schema_for_type(list[Tree]))
    assert schema["type"] == "array"
    assert schema["items"] == {"$ref": "#/$defs/Tree"}
    assert set(schema["$defs"]) == {"Tree"}
    tree = {"label": "a", "forest": [{"trees": [{"label": "b", "forest": []}]}]}
    accepts(schema, [tree])
    rejects(schema, [{"label": "a", "forest": [{"trees": [{"label": 1, "forest": []}]}]}])


def test_recursive_type_in_parameters_puts_defs_at_the_root() -> None:
    def tool(root: Node, spare: Node | None = None) -> None: ...

    schema = checked(input_schema_for(tool))
    assert schema["properties"] == {
        "root": {"$ref": "#/$defs/Node"},
        "spare": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}], "default": None},
    }
    assert set(schema["$defs"]) == {"Node"}
    accepts(schema, {"root": {"value": 1, "children": [{"value": 2}]}})
    rejects(schema, {"root": {"value": 1, "children": [{"value": "2"}]}})


# --- Annotated ----------------------------------------------------------------------------


def test_annotated_with_param_and_dict() -> None:
    tp = Annotated[str, Param(description="City", title="Where", header="Region")]
    assert checked(schema_for_type(tp)) == {
        "type": "string",
        "description": "City",
        "title": "Where",
        "x-mcp-header": "Region",
    }
    tp2 = Annotated[str, {"description": "City", "x-mcp-header": "Region"}]
    assert checked(schema_for_type(tp2)) == {
        "type": "string",
        "description": "City",
        "x-mcp-header": "Region",
    }
    tp3 = Annotated[int, Param(description="n", extra={"minimum": 0}), "ignored", {"maximum": 9}]
    schema = checked(schema_for_type(tp3))
    assert schema == {"type": "integer", "description": "n", "minimum": 0, "maximum": 9}
    accepts(schema, 0, 9)
    rejects(schema, -1, 10)


def test_param_is_hashable_and_frozen() -> None:
    param = Param(description="d", extra={"minimum": 1})
    assert hash(param) == hash(Param(description="d"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        param.description = "x"  # type: ignore[misc]


# --- unsupported types --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "name"),
    [
        (Opaque, "Opaque"),
        (bytes, "bytes"),
        (T, "T"),
        (dict[int, str], "int"),
        (list[Opaque], "Opaque"),
        (typing.Callable[[], int], "Callable"),
        ("Missing", "Missing"),
    ],
)
def test_unsupported_types_raise(tp: object, name: str) -> None:
    with pytest.raises(TypeError, match=name):
        schema_for_type(tp)


# --- what pydantic writes: models, formats, Field constraints -----------------------------

ITEM = {
    "properties": {
        "name": {"description": "What", "title": "Name", "type": "string"},
        "qty": {"default": 1, "minimum": 1, "title": "Qty", "type": "integer"},
    },
    "required": ["name"],
    "title": "Item",
    "type": "object",
}
OUTLINE = {
    "properties": {
        "label": {"title": "Label", "type": "string"},
        "children": {
            "default": [],
            "items": {"$ref": "#/$defs/Outline"},
            "title": "Children",
            "type": "array",
        },
    },
    "required": ["label"],
    "title": "Outline",
    "type": "object",
}


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (datetime.datetime, {"format": "date-time", "type": "string"}),
        (datetime.date, {"format": "date", "type": "string"}),
        (datetime.time, {"format": "time", "type": "string"}),
        (uuid.UUID, {"format": "uuid", "type": "string"}),
        (pathlib.Path, {"format": "path", "type": "string"}),
        (decimal.Decimal, {"anyOf": [{"type": "number"}, {"type": "string"}]}),
        (
            datetime.date | None,
            {"anyOf": [{"format": "date", "type": "string"}, {"type": "null"}]},
        ),
    ],
)
def test_formats_come_from_pydantic(tp: object, expected: dict[str, Any]) -> None:
    assert checked(schema_for_type(tp)) == expected


def test_decimal_is_written_as_a_string() -> None:
    assert schema_for_type(decimal.Decimal, "serialization") == {"type": "string"}


def test_model_with_nested_model_is_inlined() -> None:
    schema = checked(schema_for_type(Order))
    assert schema == {
        "properties": {
            "items": {"items": ITEM, "title": "Items", "type": "array"},
            "when": {
                "anyOf": [{"format": "date-time", "type": "string"}, {"type": "null"}],
                "default": None,
                "title": "When",
            },
        },
        "required": ["items"],
        "title": "Order",
        "type": "object",
    }
    accepts(schema, {"items": [{"name": "n"}], "when": "2026-07-28T00:00:00Z"})
    rejects(schema, {"items": [{"name": "n", "qty": 0}]}, {"items": [{}]})


def test_recursive_model_keeps_defs_at_the_root() -> None:
    assert checked(schema_for_type(Outline)) == {**OUTLINE, "$defs": {"Outline": OUTLINE}}
    schema = checked(schema_for_type(list[Outline]))
    assert schema == {
        "type": "array",
        "items": {"$ref": "#/$defs/Outline"},
        "$defs": {"Outline": OUTLINE},
    }
    accepts(schema, [{"label": "a", "children": [{"label": "b"}]}])
    rejects(schema, [{"label": "a", "children": [{"label": 1}]}])


def test_a_pydantic_def_does_not_take_a_hand_built_name() -> None:
    class Chain(BaseModel):  # the name of the recursive dataclass HandChain
        tag: str
        link: "Chain | None" = None

    schema = checked(schema_for_type(tuple[HandChain, Chain]))
    assert schema["prefixItems"] == [{"$ref": "#/$defs/Chain"}, {"$ref": "#/$defs/Chain2"}]
    assert schema["$defs"]["Chain"]["properties"]["next"] == {
        "anyOf": [{"$ref": "#/$defs/Chain"}, {"type": "null"}],
        "default": None,
    }
    assert schema["$defs"]["Chain2"]["properties"]["link"] == {
        "anyOf": [{"$ref": "#/$defs/Chain2"}, {"type": "null"}],
        "default": None,
    }
    accepts(schema, [{"value": 1, "next": {"value": 2}}, {"tag": "a", "link": {"tag": "b"}}])
    rejects(schema, [{"value": 1}, {"tag": "a", "link": {"tag": 2}}])


def test_field_constraints_join_the_schema() -> None:
    limit = Annotated[int, Field(ge=1, le=50)]
    assert checked(schema_for_type(limit)) == {"type": "integer", "minimum": 1, "maximum": 50}
    rejects(schema_for_type(limit), 0, 51)
    name = Annotated[str, Field(min_length=2, pattern="^a"), Param(description="x")]
    assert checked(schema_for_type(name)) == {
        "type": "string",
        "minLength": 2,
        "pattern": "^a",
        "description": "x",
    }
    few = Annotated[list[int], Field(max_length=3, description="d")]
    assert checked(schema_for_type(few)) == {
        "type": "array",
        "items": {"type": "integer"},
        "maxItems": 3,
        "description": "d",
    }


def test_param_wins_over_field_for_the_same_keyword() -> None:
    tp = Annotated[int, Field(description="field"), Param(description="param")]
    assert schema_for_type(tp) == {"type": "integer", "description": "param"}


def test_field_on_a_model_keeps_the_model_whole() -> None:
    schema = checked(schema_for_type(Annotated[Item, Field(description="one item")]))
    assert schema == {**ITEM, "description": "one item"}


@dataclasses.dataclass
class Holder:
    where: Point  # a stdlib TypedDict inside a dataclass: pydantic refuses it below 3.12


def test_field_on_a_type_pydantic_cannot_read_still_describes() -> None:
    schema = checked(schema_for_type(Annotated[Holder, Field(description="held")]))
    assert schema == {**schema_for_type(Holder), "description": "held"}


def test_dataclass_fields_take_pydantic_types_and_constraints() -> None:
    assert checked(schema_for_type(Stamp)) == {
        "type": "object",
        "properties": {
            "at": {"format": "date-time", "type": "string"},
            "amount": {"anyOf": [{"type": "number"}, {"type": "string"}]},
            "limit": {"type": "integer", "maximum": 50, "minimum": 1, "default": 10},
        },
        "required": ["at", "amount"],
        "additionalProperties": False,
    }
    written = schema_for_type(Stamp, "serialization")
    assert written["properties"]["amount"] == {"type": "string"}


# --- input_schema_for ---------------------------------------------------------------------


def weather(
    city: Annotated[str, Param(description="City", header="Region")],
    ctx: Context,
    days: int = 3,
    units: Literal["c", "f"] = "c",
    when: float | None = None,
    *rest: int,
    token: str = "",
    **extra: Any,
) -> str:
    return city


def test_input_schema() -> None:
    schema = checked(input_schema_for(weather))
    assert schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City", "x-mcp-header": "Region"},
            "days": {"type": "integer", "default": 3},
            "units": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "when": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "token": {"type": "string", "default": ""},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert list(schema["properties"]) == ["city", "days", "units", "when", "token"]
    accepts(schema, {"city": "Oslo"}, {"city": "Oslo", "days": 1, "when": None})
    rejects(schema, {}, {"city": "Oslo", "ctx": 1}, {"city": "Oslo", "units": "k"})


def test_no_required() -> None:
    def tool(a: int = 1, b: str = "x") -> None: ...

    schema = checked(input_schema_for(tool))
    assert schema == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "default": 1},
            "b": {"type": "string", "default": "x"},
        },
        "additionalProperties": False,
    }
    assert checked(input_schema_for(lambda: None)) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def string_hints(x: "int", ctx: "Context", items: "list[Point]" = []) -> "str":  # noqa: B006
    return ""


def test_string_annotations() -> None:
    assert checked(input_schema_for(string_hints)) == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "items": {"type": "array", "items": schema_for_type(Point), "default": []},
        },
        "required": ["x"],
        "additionalProperties": False,
    }


def test_unresolvable_context_string_is_still_skipped() -> None:
    def tool(x: int, ctx: "presa_trio.Context") -> None: ...  # type: ignore[name-defined]  # noqa: F821

    assert checked(input_schema_for(tool)) == {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
        "additionalProperties": False,
    }


@dataclasses.dataclass
class MyContext:
    """A user's own class: not presa_trio's Context, whatever it is called."""

    locale: str


MyContext.__name__ = MyContext.__qualname__ = "Context"


def test_a_users_class_named_context_is_an_ordinary_argument() -> None:
    def tool(ctx: MyContext, x: int) -> None: ...

    signature = Signature.of(tool)
    assert signature.context_param is None
    assert signature.names == {"ctx", "x"}
    assert checked(signature.input_schema())["required"] == ["ctx", "x"]


def test_the_context_parameter_is_found_once_for_schema_binding_and_prompts() -> None:
    def tool(ctx: Context, name: str, count: int = 1) -> None: ...

    signature = Signature.of(tool)
    assert signature.context_param == "ctx"
    assert signature.names == {"name", "count"}
    assert list(signature.input_schema()["properties"]) == ["name", "count"]
    assert signature.prompt_arguments() == [{"name": "name", "required": True}, {"name": "count"}]


def test_unresolvable_parameter_names_itself() -> None:
    def tool(x: "Nowhere") -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(TypeError, match=r"parameter 'x'.*Nowhere"):
        input_schema_for(tool)


def test_unsupported_parameter_names_the_parameter_and_type() -> None:
    def tool(blob: bytes) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'blob' of .*tool.*bytes"):
        input_schema_for(tool)


def test_defaults_that_are_not_json_are_omitted() -> None:
    marker = object()

    def tool(
        a: Any = marker,
        b: float = float("nan"),
        c: list[int] = (1, 2),  # type: ignore[assignment]
        d: dict[str, Any] = {"k": [None, True, 1.5]},  # noqa: B006
        e: Color = Color.RED,
        f: dict[str, Any] = {"k": marker},  # noqa: B006
    ) -> None: ...

    props = checked(input_schema_for(tool))["properties"]
    assert "default" not in props["a"]
    assert "default" not in props["b"]
    assert props["c"]["default"] == [1, 2]
    assert props["d"]["default"] == {"k": [None, True, 1.5]}
    assert props["e"]["default"] == "red"
    assert "default" not in props["f"]


def test_methods_and_async_functions() -> None:
    class Tools:
        def find(self, ctx: Context, name: str) -> list[str]:
            return [name]

        async def count(self, name: str) -> int:
            return 1

    expected = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    assert checked(input_schema_for(Tools().find)) == expected
    assert checked(input_schema_for(Tools().count)) == expected


def test_missing_annotations_mean_any() -> None:
    def tool(x, y=2):  # type: ignore[no-untyped-def]
        return x

    assert checked(input_schema_for(tool)) == {
        "type": "object",
        "properties": {"x": {}, "y": {"default": 2}},
        "required": ["x"],
        "additionalProperties": False,
    }


# --- output_schema_for (pydantic's schema; exact shapes in tests/handlers/test_output.py) ---


def wrapped(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> dict[str, Any]:
    found = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
        "additionalProperties": False,
        "x-fastmcp-wrap-result": True,
    }
    return {**found, "$defs": defs} if defs else found


POINT = {
    "title": "Point",
    "type": "object",
    "properties": {"x": {"title": "X", "type": "integer"}, "y": {"title": "Y", "type": "integer"}},
    "required": ["x", "y"],
}


def test_output_schema_for_object_returns() -> None:
    def td() -> Point: ...
    def mapping() -> dict[str, int]: ...
    def annotated() -> Annotated[Point, Param(description="A point")]: ...
    async def coro() -> Point: ...
    def awaitable() -> Awaitable[Point]: ...

    assert checked(output_schema_for(td)) == POINT
    assert checked(output_schema_for(mapping)) == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    assert checked(output_schema_for(annotated)) == {**POINT, "description": "A point"}
    assert output_schema_for(coro) == POINT
    assert output_schema_for(awaitable) == POINT


def test_output_schema_for_recursive_root_is_still_an_object() -> None:
    def tool() -> Node: ...

    schema = checked(output_schema_for(tool))
    assert schema["type"] == "object"
    assert set(schema["$defs"]) == {"Node"}
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_output_schema_none_for_content_returns() -> None:
    def nothing() -> None: ...
    def missing():  # type: ignore[no-untyped-def]
        ...
    def anything() -> Any: ...
    def content() -> TextContent: ...
    def block() -> Block: ...
    def unresolved() -> "Nowhere": ...  # type: ignore[name-defined]  # noqa: F821
    def blocks() -> list[dict[str, Any]]: ...
    def listed() -> list: ...  # type: ignore[type-arg]
    def untyped() -> list[Any]: ...
    def mapping() -> dict: ...  # type: ignore[type-arg]
    def built() -> dict[str, Any]: ...
    def keyed() -> dict[int, str]: ...
    def text_or_block() -> str | dict[str, Any]: ...
    def some_blocks() -> Sequence[TextContent | Block]: ...
    def raw() -> bytes: ...
    def opaque() -> Opaque: ...
    def whole() -> ToolResult: ...

    for fn in (
        nothing,
        missing,
        anything,
        content,
        block,
        unresolved,
        blocks,
        listed,
        untyped,
        mapping,
        built,
        keyed,
        text_or_block,
        some_blocks,
        raw,
        opaque,
        whole,
    ):
        assert output_schema_for(fn) is None, fn.__name__


def test_values_that_are_not_objects_are_wrapped_as_result() -> None:
    def text() -> str: ...
    def maybe_text() -> str | None: ...
    def number() -> int: ...
    def listing() -> list[Point]: ...
    def optional() -> Point | None: ...
    def color() -> Color: ...
    def names() -> list[str]: ...
    def pair() -> tuple[str, int]: ...

    assert checked(output_schema_for(text)) == wrapped({"type": "string"})
    assert checked(output_schema_for(maybe_text)) == wrapped(
        {"anyOf": [{"type": "string"}, {"type": "null"}]}
    )
    assert checked(output_schema_for(number)) == wrapped({"type": "integer"})
    assert checked(output_schema_for(listing)) == wrapped(
        {"type": "array", "items": {"$ref": "#/$defs/Point"}}, {"Point": POINT}
    )
    assert checked(output_schema_for(optional)) == wrapped(
        {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}, {"Point": POINT}
    )
    assert checked(output_schema_for(color)) == wrapped(
        {"title": "Color", "type": "string", "enum": ["red", "green"]}
    )
    assert checked(output_schema_for(names)) == wrapped(
        {"type": "array", "items": {"type": "string"}}
    )
    assert checked(output_schema_for(pair)) == wrapped(
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "integer"}],
            "minItems": 2,
            "maxItems": 2,
        }
    )
    assert Signature.of(number).output_shape() == (wrapped({"type": "integer"}), True)
    assert Signature.of(optional).output_shape()[1] is True


def test_objects_are_not_wrapped() -> None:
    def td() -> Point: ...
    def model() -> Order: ...

    assert Signature.of(td).output_shape() == (POINT, False)
    schema, wraps = Signature.of(model).output_shape()
    assert wraps is False
    assert checked(schema)["type"] == "object"


def test_output_schema_with_unsupported_field_raises() -> None:
    class Bad(TypedDict):
        thing: Opaque

    def tool() -> Bad: ...

    with pytest.raises(TypeError, match="Opaque"):
        output_schema_for(tool)


# --- to_jsonable --------------------------------------------------------------------------


def test_to_jsonable() -> None:
    report = Report("t", {"x": 1, "y": 2}, Options("o", tags=["a"]))
    data = to_jsonable(report)
    assert data == {
        "title": "t",
        "where": {"x": 1, "y": 2},
        "options": {"name": "o", "retries": 3, "tags": ["a"], "color": "green"},
    }
    accepts(schema_for_type(Report), data)
    assert to_jsonable({"a": (1, Color.RED), Color.GREEN: {3, 1, 2}}) == {
        "a": [1, "red"],
        "green": [1, 2, 3],
    }
    assert to_jsonable(Level.HIGH) == 2
    assert to_jsonable("s") == "s"
    assert to_jsonable(None) is None
    assert sorted(typing.cast(list[Any], to_jsonable(frozenset({1, "a"}))), key=str) == [1, "a"]
    assert to_jsonable(Options) is Options  # a class is not an instance


class Pair(typing.NamedTuple):
    x: int
    y: int


@dataclasses.dataclass
class Shelf:
    name: str
    points: list[Pair]
    by_color: dict[Color, list[Options]]
    levels: set[Level]
    inner: Options | None = None


def test_to_jsonable_reads_a_dataclass_field_by_field_as_deep_as_it_goes() -> None:
    """What each field holds comes out as it would on its own: named tuples as lists, enum
    keys by their values, sets sorted, dataclasses inside lists and dicts as objects."""
    shelf = Shelf(
        "s",
        [Pair(1, 2)],
        {Color.RED: [Options("o", tags=["t"])]},
        {Level.HIGH, Level.LOW},
        Options("i", retries=0),
    )
    options = {"name": "o", "retries": 3, "tags": ["t"], "color": "green"}
    assert to_jsonable(shelf) == {
        "name": "s",
        "points": [[1, 2]],
        "by_color": {"red": [options]},
        "levels": [Level.LOW.value, Level.HIGH.value],
        "inner": {"name": "i", "retries": 0, "tags": [], "color": "green"},
    }
    assert to_jsonable([shelf, {"k": shelf}])[1] == {"k": to_jsonable(shelf)}  # type: ignore[index]


def test_to_jsonable_writes_what_pydantic_writes() -> None:
    utc = datetime.UTC
    assert to_jsonable(datetime.datetime(2026, 7, 28, 9, 30, tzinfo=utc)) == "2026-07-28T09:30:00Z"
    assert to_jsonable(datetime.date(2026, 7, 28)) == "2026-07-28"
    assert to_jsonable(uuid.UUID(int=1)) == "00000000-0000-0000-0000-000000000001"
    assert to_jsonable(decimal.Decimal("1.50")) == "1.50"
    assert to_jsonable(pathlib.Path("/a/b")) == "/a/b"
    order = Order(items=[Item(name="n")], when=datetime.datetime(2026, 7, 28, tzinfo=utc))
    assert to_jsonable(order) == {
        "items": [{"name": "n", "qty": 1}],
        "when": "2026-07-28T00:00:00Z",
    }
    stamp = Stamp(datetime.datetime(2026, 7, 28), decimal.Decimal("2"))
    data = to_jsonable(stamp)
    assert data == {"at": "2026-07-28T00:00:00", "amount": "2", "limit": 10}
    accepts(schema_for_type(Stamp, "serialization"), data)
    assert to_jsonable({"ids": (uuid.UUID(int=2),), "colors": {Color.RED}}) == {
        "ids": ["00000000-0000-0000-0000-000000000002"],
        "colors": ["red"],
    }
    opaque = Opaque()
    assert to_jsonable(opaque) is opaque  # json.dumps refuses it later, as before


def test_a_model_is_written_by_alias_as_its_schema_says() -> None:
    class Person(BaseModel):
        full_name: str = Field(alias="fullName")

    schema = schema_for_type(Person, "serialization")
    assert list(schema["properties"]) == ["fullName"]
    data = to_jsonable(Person(fullName="Ada"))
    assert data == {"fullName": "Ada"}
    accepts(schema, data)


# --- property: nested list/dict/Optional/tuple over scalars --------------------------------

_json_floats = st.floats(allow_nan=False, allow_infinity=False)
_scalar_cases = st.sampled_from(
    [
        (int, st.integers()),
        (float, _json_floats | st.integers()),
        (str, st.text()),
        (bool, st.booleans()),
        (type(None), st.none()),
        (Literal["a", "b"], st.sampled_from(["a", "b"])),
        (Color, st.sampled_from(["red", "green"])),
    ]
)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    def wrap(case: tuple[Any, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
        tp, values = case
        return st.sampled_from(
            [
                (list[tp], st.lists(values, max_size=3)),
                (dict[str, tp], st.dictionaries(st.text(max_size=3), values, max_size=3)),
                (Optional[tp], st.none() | values),  # noqa: UP045
                (tuple[tp, int], st.tuples(values, st.integers()).map(list)),
                (Annotated[tp, Param(description="d")], values),
            ]
        )

    return children.flatmap(wrap)


_cases = st.recursive(_scalar_cases, _extend, max_leaves=6)


@settings(database=None, max_examples=150, deadline=None)
@given(st.data())
def test_generated_types_accept_their_values(data: st.DataObject) -> None:
    tp, values = data.draw(_cases)
    schema = checked(schema_for_type(tp))
    value = data.draw(values)
    assert V(schema).is_valid(value), (tp, schema, value)
    assert not V(schema).is_valid(object())
