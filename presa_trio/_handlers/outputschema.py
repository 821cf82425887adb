"""A tool's return annotation to its ``outputSchema``, and whether a result is sent wrapped as
``{"result": value}`` (spec 2026-07-28 server/tools.mdx, outputSchema and structuredContent).

Pure and called only while a tool is declared. The schema is pydantic's (``TypeAdapter``, in
serialization mode), as the MCP Python SDK derives it; this module decides only which hints
are data and which are content, and wraps what is not an object. It neither converts nor
checks a value (``convert.to_jsonable`` writes one, the registry checks it).
"""

from __future__ import annotations

import collections.abc as cabc
import types
import typing
from typing import Any

from .adapt import json_schema
from .typeschema import EMPTY, Param, is_block_class, is_object_class, param_keywords, strip

__all__ = ["WRAP_MARKER", "output_shape"]

#: Marks a wrapped schema for FastMCP's client, which then hands back ``result`` itself as
#: its ``.data`` (the MCP Python SDK's client reads ``{"result": ...}`` as it is).
WRAP_MARKER = "x-fastmcp-wrap-result"

_NOT_DATA: tuple[object, ...] = (Any, object, EMPTY, None, type(None), bytes, bytearray, memoryview)
_MAPPINGS = (dict, cabc.Mapping, cabc.MutableMapping)
_SEQUENCES = (list, tuple, set, frozenset, cabc.Sequence, cabc.MutableSequence, cabc.Set)
_UNION = (typing.Union, types.UnionType)
_DEFS = "#/$defs/"


def output_shape(annotation: object) -> tuple[dict[str, Any] | None, bool]:
    """The ``outputSchema`` for a return annotation (None: the result is content only), and
    whether a value is sent wrapped as ``{"result": value}``.

    An object (a TypedDict, a dataclass, a pydantic model, ``dict[str, int]``) is sent as it
    is; anything else that is data (``str``, ``int``, ``list[Point]``, ``Point | None``) is
    wrapped, and its schema says so to FastMCP's client (``x-fastmcp-wrap-result``). Content
    gets no schema: no hint, ``Any``, ``None``, ``bytes``, content blocks and what may hold
    them (``dict``, ``dict[str, Any]``, ``list[dict[str, Any]]``, a bare ``list``), the
    shapes presa_trio's content builders return. A TypedDict, dataclass or model pydantic
    cannot describe raises TypeError; any other type with no JSON Schema is content.
    """
    if typing.get_origin(annotation) in (cabc.Awaitable, cabc.Coroutine):
        args = typing.get_args(annotation)
        annotation = args[-1] if args else annotation
    core = strip(annotation)
    if is_object_class(core):
        if is_block_class(core):
            return None, False
        return _annotated(_inline_root(json_schema(annotation, "serialization")), annotation), False
    if not _is_data(core):
        return None, False
    try:
        schema = json_schema(annotation, "serialization")
    except TypeError:
        return None, False
    if _is_object(schema):
        return _annotated(_inline_root(schema), annotation), False
    schema = _annotated(schema, annotation)
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
        "additionalProperties": False,
        WRAP_MARKER: True,
    }
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True


def _annotated(schema: dict[str, Any], annotation: object) -> dict[str, Any]:
    """``schema`` with the keywords of the ``Param`` and mappings in ``Annotated[T, ...]``
    (pydantic reads ``Field`` and constraints itself, but not these)."""
    while typing.get_origin(annotation) is typing.Annotated:
        for meta in typing.get_args(annotation)[1:]:
            if isinstance(meta, Param):
                schema.update(param_keywords(meta))
            elif isinstance(meta, cabc.Mapping):
                schema.update(meta)
        annotation = typing.get_args(annotation)[0]
    return schema


def _is_data(tp: object) -> bool:
    """Is a value of this hint data for ``structuredContent``, rather than content?"""
    while isinstance(tp, typing.NewType):
        tp = tp.__supertype__
    if tp in _NOT_DATA or isinstance(tp, str | typing.ForwardRef | typing.TypeVar):
        return False
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in _UNION:
        return all(_is_data(strip(a)) or a is type(None) for a in args) and any(
            a is not type(None) for a in args
        )
    if (origin or tp) in _MAPPINGS:
        # dict[str, Any] is what a content builder returns; a typed value is data. JSON keys
        # are strings, so a mapping keyed by anything else stays content.
        return len(args) == 2 and strip(args[0]) is str and _is_typed_value(strip(args[1]))
    if (origin or tp) in _SEQUENCES:
        items = [strip(a) for a in args if a is not Ellipsis]
        return bool(items) and all(_is_typed_value(a) and not _may_be_block(a) for a in items)
    return not is_block_class(tp)


def _is_typed_value(tp: object) -> bool:
    """A value type that says what it holds (not ``Any`` or ``object``)."""
    return tp not in (Any, object)


def _may_be_block(tp: object) -> bool:
    """Could a value of this type be one content block (a dict with a ``type``)?"""
    origin = typing.get_origin(tp)
    if (origin or tp) in _MAPPINGS:
        args = typing.get_args(tp)
        return not args or not _is_typed_value(strip(args[1]))
    if origin in _UNION:
        return any(_may_be_block(strip(a)) for a in typing.get_args(tp))
    return is_block_class(tp)


def _target(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema itself, or the definition its root ``$ref`` names (a recursive class)."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS):
        found: dict[str, Any] = schema.get("$defs", {}).get(ref.removeprefix(_DEFS), {})
        return found
    return schema


def _is_object(schema: dict[str, Any]) -> bool:
    return _target(schema).get("type") == "object"


def _inline_root(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema whose root is a bare ``$ref`` with that definition copied onto its root (an
    outputSchema needs ``type: object`` there); ``$defs`` stay for the inner references."""
    if "$ref" not in schema:
        return schema
    rest = {key: value for key, value in schema.items() if key != "$ref"}
    return {**_target(schema), **rest}
