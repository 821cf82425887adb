"""pydantic's view of an annotation: a ``TypeAdapter`` for it, and the JSON Schema pydantic
writes for the types ``_typeschema`` does not write by hand (models, ``datetime``, ``UUID``,
``Decimal``, ``Path``; ``Field`` constraints).

Pure and called only while handlers are declared, never per call. Schemas come back with
pydantic's own ``#/$defs/...`` references; ``_typeschema`` adopts them into the schema it builds.
"""

from __future__ import annotations

import contextlib
import enum
import json
import sys
import types
import typing
from typing import Any, Literal

import typing_extensions
from pydantic import BeforeValidator, PydanticUserError, TypeAdapter
from pydantic_core import SchemaError

__all__ = ["JsonMode", "adapter_for", "json_schema", "metadata_keywords", "readable"]

JsonMode = Literal["validation", "serialization"]
_QUALIFIERS = ("Required", "NotRequired", "ReadOnly")

#: What pydantic raises for a type it cannot build a validator or a JSON Schema for.
ADAPT_ERRORS = (PydanticUserError, SchemaError, TypeError, ValueError, NameError)


def adapter_for(tp: object) -> TypeAdapter[Any]:
    """A ``TypeAdapter`` for ``tp``; TypeError (with pydantic's reason) when there is none."""
    try:
        return _new(readable(tp))
    except ADAPT_ERRORS as exc:
        raise TypeError(f"pydantic cannot convert {tp!r}: {_first_line(exc)}") from None


def json_schema(tp: object, mode: JsonMode) -> dict[str, Any]:
    """pydantic's JSON Schema for ``tp`` (with its ``$defs``), or TypeError."""
    try:
        return _new(readable(tp)).json_schema(mode=mode)
    except ADAPT_ERRORS as exc:
        raise TypeError(f"cannot build a JSON Schema for {tp!r}: {_first_line(exc)}") from None


def metadata_keywords(base: object, metadata: tuple[object, ...], mode: JsonMode) -> dict[str, Any]:
    """The keywords ``Annotated[base, *metadata]`` adds to the schema of ``base`` in pydantic's
    eyes: ``Field(ge=1, le=50)`` on an ``int`` gives ``{"minimum": 1, "maximum": 50}``.

    Metadata pydantic does not know (strings, your own objects) adds nothing, as before. When
    pydantic cannot handle ``base`` itself, the keywords are read off ``Any`` instead (a
    ``description`` still applies; a constraint on a type pydantic does not know cannot).
    """
    try:
        return _added_keywords(base, metadata, mode)
    except ADAPT_ERRORS as exc:
        first = exc
    try:
        return _added_keywords(Any, metadata, mode)
    except ADAPT_ERRORS:
        raise TypeError(f"cannot apply {metadata!r} to {base!r}: {_first_line(first)}") from None


def _added_keywords(base: object, metadata: tuple[object, ...], mode: JsonMode) -> dict[str, Any]:
    base = readable(base)
    plain = _new(base).json_schema(mode=mode)
    constrained = _new(typing.Annotated[(base, *metadata)]).json_schema(mode=mode)
    # A keyword that points into pydantic's $defs cannot move to another schema; such are
    # pydantic's restatements of the base type (``_typeschema`` wrote that already).
    return {
        k: v
        for k, v in constrained.items()
        if plain.get(k) != v and k not in ("$ref", "$defs") and '"$ref"' not in json.dumps(v)
    }


def _new(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def readable(tp: object) -> object:
    """``tp`` in a form pydantic reads: a ``Literal`` of enum members also takes their values
    (as its schema says it does), and below Python 3.12 stdlib ``TypedDict`` classes are
    rebuilt as ``typing_extensions`` ones. ``tp`` itself when there is nothing to change.

    A TypedDict that contains itself is cut at the inner occurrence (``Any`` there): its
    inner levels arrive as JSON data, unconverted.
    """
    return _rebuild(tp, ())


def _is_stdlib_typeddict(tp: object) -> bool:
    return (
        isinstance(tp, type)
        and issubclass(tp, dict)
        and hasattr(tp, "__required_keys__")
        and type(tp).__module__ == "typing"
    )


def _rebuild(tp: object, active: tuple[type, ...]) -> object:
    if _is_stdlib_typeddict(tp) and sys.version_info < (3, 12):
        assert isinstance(tp, type)
        if tp in active:
            return Any
        required: frozenset[str] = getattr(tp, "__required_keys__", frozenset())
        fields: dict[str, object] = {}
        for key, hint in typing.get_type_hints(tp, include_extras=True).items():
            rebuilt = _rebuild(_unqualified(hint), (*active, tp))
            fields[key] = rebuilt if key in required else typing_extensions.NotRequired[rebuilt]
        # The functional form: the class statement cannot take computed fields.
        make: Any = typing_extensions.TypedDict
        copy: type = make(tp.__name__, fields)
        copy.__module__, copy.__qualname__ = tp.__module__, tp.__qualname__
        copy.__doc__ = tp.__doc__
        return copy
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return _enum_literal(tp, args)
    if not args or origin is None:
        return tp
    if origin is typing.Annotated:
        base = _rebuild(args[0], active)
        return tp if base is args[0] else typing.Annotated[(base, *tp.__metadata__)]  # type: ignore[attr-defined]
    mapped = tuple(a if a is Ellipsis else _rebuild(a, active) for a in args)
    if all(m is a for m, a in zip(mapped, args, strict=True)):
        return tp
    if origin is typing.Union or origin is types.UnionType:
        return typing.Union[mapped]  # noqa: UP007 - a computed union has no `|` spelling
    if isinstance(tp, types.GenericAlias):
        return types.GenericAlias(origin, mapped)
    return tp.copy_with(mapped)  # type: ignore[attr-defined]  # typing's own aliases


def _enum_literal(tp: object, values: tuple[object, ...]) -> object:
    """``Literal[Color.RED]`` that also takes ``"red"``: pydantic takes only the member."""
    members: dict[tuple[type, object], enum.Enum] = {}
    for value in values:
        if isinstance(value, enum.Enum):
            with contextlib.suppress(TypeError):  # an unhashable value has no JSON schema
                members[type(value.value), value.value] = value
    if not members:
        return tp

    def to_member(value: object) -> object:
        if isinstance(value, enum.Enum):
            return value
        try:
            return members.get((type(value), value), value)
        except TypeError:
            return value

    return typing.Annotated[tp, BeforeValidator(to_member)]


def _unqualified(hint: object) -> object:
    """A TypedDict key's hint without ``Required``/``NotRequired``/``ReadOnly`` around it."""
    while getattr(typing.get_origin(hint), "_name", None) in _QUALIFIERS:
        hint = typing.get_args(hint)[0]
    return hint


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
