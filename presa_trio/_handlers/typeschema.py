"""Type annotations to JSON Schema (2020-12): one annotation or a list of named parameters
(spec 2026-07-28 server/tools.mdx, inputSchema); a tool's outputSchema is ``outputschema``'s.

Pure: it never looks at a function (``_signature`` resolves hints and finds the ``Context``
parameter, once) and neither validates nor coerces (``_convert`` does). The common types are
written by hand; the rest (models, ``datetime``, ``UUID``, ``Field`` constraints) come from
pydantic (``_adapt``). Unsupported annotations raise TypeError.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import enum
import inspect
import math
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from typing import Any, final

from .adapt import JsonMode, json_schema, metadata_keywords

__all__ = [
    "Param",
    "is_block_class",
    "is_object_class",
    "param_keywords",
    "parameters_schema",
    "schema_for_type",
    "strip",
]

#: The default of a parameter that has none (``inspect.Parameter.empty``).
EMPTY = inspect.Parameter.empty


@final
@dataclasses.dataclass(frozen=True)
class Param:
    """Schema annotations for ``Annotated[T, Param(...)]``; ``header`` becomes ``x-mcp-header``."""

    description: str | None = None
    title: str | None = None
    header: str | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False)


_SCALARS: tuple[tuple[object, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (None, "null"),
    (type(None), "null"),
)
_SEQUENCES = (list, cabc.Sequence, cabc.MutableSequence)
_SETS = (set, frozenset, cabc.Set, cabc.MutableSet)
_MAPPINGS = (dict, cabc.Mapping, cabc.MutableMapping)
_QUALIFIERS = ("Required", "NotRequired", "ReadOnly")  # by name: typing or typing_extensions
_CONTENT_TYPES = frozenset({"text", "image", "audio", "resource_link", "resource"})
_CONTENT_NAMES = frozenset(
    {"TextContent", "ImageContent", "AudioContent", "ResourceLink", "EmbeddedResource"}
)
_NO_DEFAULT = object()
_REFUSED = (bytes, bytearray, memoryview)  # JSON has no bytes; a str would be a guess
_DEFS = "#/$defs/"


def _is_typeddict(tp: object) -> bool:
    # Duck-typed so typing_extensions.TypedDict (its own metaclass on 3.11) counts too.
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def is_object_class(tp: object) -> bool:
    return _is_typeddict(tp) or (isinstance(tp, type) and dataclasses.is_dataclass(tp))


def strip(tp: object) -> object:
    """Drop ``Annotated`` and TypedDict qualifiers (``Required`` & co.) around a type."""
    while typing.get_origin(tp) is typing.Annotated or _is_qualifier(typing.get_origin(tp)):
        tp = typing.get_args(tp)[0]
    return tp


def _is_qualifier(origin: object) -> bool:
    return origin is not None and getattr(origin, "_name", None) in _QUALIFIERS


def _json_type(value: object) -> str | None:
    """The JSON type of a scalar value (bool before int), None when it is not a JSON scalar."""
    kinds = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))
    if value is None:
        return "null"
    return next((name for py, name in kinds if isinstance(value, py)), None)


def _default(value: object) -> object:
    """``value`` as JSON data, or ``_NO_DEFAULT`` when it has no faithful JSON form."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _NO_DEFAULT
    if isinstance(value, list | tuple):
        items = [_default(v) for v in value]
        return _NO_DEFAULT if any(i is _NO_DEFAULT for i in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        entries = {k: _default(v) for k, v in value.items()}
        return _NO_DEFAULT if any(v is _NO_DEFAULT for v in entries.values()) else entries
    return _NO_DEFAULT


class _Builder:
    """Builds schemas for one root; recursive classes go to ``$defs`` instead of looping.

    ``mode`` is pydantic's: a ``Decimal`` is read from a number or a string ("validation",
    for arguments) but written as a string ("serialization", for results).
    """

    def __init__(self, mode: JsonMode = "validation") -> None:
        self.mode: JsonMode = mode
        self.defs: dict[str, dict[str, Any]] = {}
        self._names: dict[type, str] = {}
        self._taken: set[str] = set()  # $defs names given out, also those not filled in yet
        self._active: list[type] = []

    def root(self, schema: dict[str, Any]) -> dict[str, Any]:
        if not self.defs:
            return schema
        ref = schema.pop("$ref", None)
        if isinstance(ref, str):  # the root is itself a recursive class: inline its body
            schema = {**self.defs[ref.rpartition("/")[2]], **schema}
        return {**schema, "$defs": self.defs}

    def build(self, tp: object) -> dict[str, Any]:
        if tp is Any or tp is object or tp is inspect.Parameter.empty:
            return {}
        for py, name in _SCALARS:
            if tp is py:
                return {"type": name}
        if isinstance(tp, str | typing.ForwardRef):
            raise TypeError(f"unresolved forward reference {tp!r}; is it importable at runtime?")
        if tp in _REFUSED or isinstance(tp, typing.TypeVar):
            raise TypeError(f"cannot build a JSON Schema for {tp!r}: unsupported type")
        if isinstance(tp, typing.NewType):
            return self.build(tp.__supertype__)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            schema = self.build(args[0])
            # What pydantic reads (Field(ge=1), annotated_types) goes first, so that Param and
            # mappings, written for this schema, win over it.
            known = tuple(m for m in args[1:] if not isinstance(m, Param | Mapping | str))
            if known:
                schema.update(metadata_keywords(args[0], known, self.mode))
            for meta in args[1:]:
                if isinstance(meta, Param):
                    schema.update(param_keywords(meta))
                elif isinstance(meta, Mapping):
                    schema.update(meta)
            return schema
        if _is_qualifier(origin):
            return self.build(args[0])
        if origin is typing.Literal:
            return _enum_schema(tp, args)
        if origin is typing.Union or origin is types.UnionType:
            schemas = [self.build(a) for a in args if a is not type(None)]
            if type(None) in args:
                schemas.append({"type": "null"})
            return {"anyOf": schemas}
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return _enum_schema(tp, tuple(tp))
        if is_object_class(tp):
            assert isinstance(tp, type)
            return self._object(tp)
        origin = tp if origin is None else origin
        if origin in _SEQUENCES or tp is tuple or tp is typing.Tuple:  # noqa: UP006
            return {"type": "array", **({"items": self.build(args[0])} if args else {})}
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.build(args[0])}
            if not args:  # tuple[()]
                return {"type": "array", "maxItems": 0}
            prefix = [self.build(a) for a in args]
            n = len(args)
            return {"type": "array", "prefixItems": prefix, "minItems": n, "maxItems": n}
        if origin in _SETS:
            items = {"items": self.build(args[0])} if args else {}
            return {"type": "array", **items, "uniqueItems": True}
        if origin in _MAPPINGS:
            if not args:
                return {"type": "object"}
            schema = {"type": "object", "additionalProperties": self.build(args[1])}
            key = self.build(args[0])
            if key != {} and key.get("type") != "string":
                raise TypeError(f"cannot build a JSON Schema for {tp!r}: JSON keys are strings")
            if key not in ({}, {"type": "string"}):
                schema["propertyNames"] = key
            return schema
        return self._adopt(json_schema(tp, self.mode))

    def _adopt(self, schema: dict[str, Any]) -> dict[str, Any]:
        """pydantic's schema with its ``$defs`` inlined, except where a definition contains
        itself: that one joins this root's ``$defs`` (under a name not taken there)."""
        found: dict[str, Any] = schema.pop("$defs", {})
        renamed: dict[str, str] = {}

        def walk(node: Any, stack: tuple[str, ...]) -> Any:
            if isinstance(node, list):
                return [walk(item, stack) for item in node]
            if not isinstance(node, dict):
                return node
            ref = node.get("$ref")
            if not (isinstance(ref, str) and ref.removeprefix(_DEFS) in found):
                return {key: walk(value, stack) for key, value in node.items()}
            name = ref.removeprefix(_DEFS)
            rest = {key: walk(value, stack) for key, value in node.items() if key != "$ref"}
            if name not in stack:
                body = walk(found[name], (*stack, name))
                if name not in renamed:  # it did not meet itself: inline it
                    return {**body, **rest}
                self.defs.setdefault(renamed[name], body)
            elif name not in renamed:
                renamed[name] = self._free_name(name)
            return {"$ref": _DEFS + renamed[name], **rest}

        adopted: dict[str, Any] = walk(schema, ())
        return adopted

    def _free_name(self, name: str) -> str:
        candidate, i = name, 2
        while candidate in self._taken:
            candidate, i = f"{name}{i}", i + 1
        self._taken.add(candidate)
        return candidate

    def _object(self, cls: type) -> dict[str, Any]:
        name = self._names.get(cls)
        if name is None and cls in self._active:  # recursion: give it a $defs entry
            name = self._free_name(cls.__name__)
            self._names[cls] = name
        if name is not None:
            return {"$ref": f"#/$defs/{name}"}
        self._active.append(cls)
        try:
            body = self._typeddict(cls) if _is_typeddict(cls) else self._dataclass(cls)
        finally:
            self._active.pop()
        if cls in self._names:
            self.defs[self._names[cls]] = body
            return {"$ref": f"#/$defs/{self._names[cls]}"}
        return body

    def _typeddict(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls, include_extras=True)
        required_keys: Collection[str] = getattr(cls, "__required_keys__", frozenset())
        props = {key: self.build(tp) for key, tp in hints.items()}
        return _object_schema(props, [key for key in hints if key in required_keys])

    def _dataclass(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls, include_extras=True)
        props: dict[str, Any] = {}
        required: list[str] = []
        for f in dataclasses.fields(cls):
            props[f.name] = self.build(hints.get(f.name, Any))
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
            elif (value := _default(f.default)) is not _NO_DEFAULT:
                props[f.name]["default"] = value
        return _object_schema(props, required)


def _object_schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def param_keywords(param: Param) -> dict[str, Any]:
    named = {"description": param.description, "title": param.title, "x-mcp-header": param.header}
    return {**{k: v for k, v in named.items() if v is not None}, **param.extra}


def _enum_schema(tp: object, values: tuple[object, ...]) -> dict[str, Any]:
    plain = [v.value if isinstance(v, enum.Enum) else v for v in values]
    kinds = {_json_type(v) for v in plain}
    if None in kinds:
        raise TypeError(f"cannot build a JSON Schema for {tp!r}: values must be JSON scalars")
    if len(kinds) == 1:
        return {"type": kinds.pop(), "enum": plain}
    return {"enum": plain}


def schema_for_type(tp: object, mode: JsonMode = "validation") -> dict[str, Any]:
    """The JSON Schema for one annotation; raises TypeError for unsupported types."""
    builder = _Builder(mode)
    return builder.root(builder.build(tp))


def parameters_schema(
    parameters: Sequence[tuple[str, object, object]], label: str = "handler"
) -> dict[str, Any]:
    """An object schema with one property per ``(name, annotation, default)``, in order.

    A parameter whose default is ``EMPTY`` is required; a default with a faithful JSON form
    is published as ``default``.
    """
    builder = _Builder()
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, annotation, default in parameters:
        try:
            schema = builder.build(annotation)
        except TypeError as exc:
            raise TypeError(f"parameter {name!r} of {label}: {exc}") from exc
        if default is EMPTY:
            required.append(name)
        elif (value := _default(default)) is not _NO_DEFAULT:
            schema["default"] = value
        props[name] = schema
    return builder.root(_object_schema(props, required))


def is_block_class(tp: object) -> bool:
    """A TypedDict or dataclass shaped like an MCP content block (``TextContent``...)."""
    return (
        is_object_class(tp)
        and isinstance(tp, type)
        and (tp.__name__ in _CONTENT_NAMES or _is_content_class(tp))
    )


def _is_content_class(cls: type) -> bool:
    """A class shaped like an MCP content block (``type`` is a Literal of block kinds)."""
    try:
        kind = strip(typing.get_type_hints(cls, include_extras=True).get("type"))
    except NameError:
        return False
    values = typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else ()
    return bool(values) and set(values) <= _CONTENT_TYPES
