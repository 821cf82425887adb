"""Tool arguments from a command line: ``KEY=VALUE`` strings typed by the tool's input schema.

Pure: values in, values out. ``count=3`` is the number 3 where the schema says ``integer``
or ``number``, ``on=true`` a boolean where it says ``boolean``, an array or object is written
as JSON, and a string stays as typed. It does not validate the whole call: the server does
that and answers an error result for a bad one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


class ArgumentError(ValueError):
    """A ``KEY=VALUE`` or ``--args`` the tool cannot take; its text says which and why."""


def parse_pairs(
    pairs: Sequence[str], schema: Mapping[str, Any], base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``base`` (from ``--args``) with each ``KEY=VALUE`` of ``pairs`` typed and set over it.
    A key the schema does not name is refused, unless its ``additionalProperties`` allows
    other keys (they are typed by it when it is a schema)."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    more = schema.get("additionalProperties")  # other keys: refused unless declared open
    arguments = dict(base or {})
    for pair in pairs:
        key, equals, text = pair.partition("=")
        if not equals or not key:
            raise ArgumentError(f"expected KEY=VALUE, got {pair!r}")
        if key not in properties and more in (False, None):
            known = ", ".join(sorted(properties)) or "none"
            raise ArgumentError(f"the tool takes no argument {key!r} (it takes: {known})")
        prop = properties.get(key, more)
        arguments[key] = coerce(key, text, prop if isinstance(prop, Mapping) else {})
    return arguments


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    """``--args``/``--answer`` JSON that must be an object."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ArgumentError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ArgumentError(f"{what} must be a JSON object")
    return value


def coerce(key: str, text: str, prop: Mapping[str, Any]) -> Any:
    """``text`` as the JSON type ``prop`` declares. With several types (``["integer",
    "null"]``, ``anyOf``), the first that reads ``text`` wins, a string last."""
    types = _types(prop)
    if not types:
        return _json_or_text(text)
    for kind in sorted(types, key=_ORDER.index):
        try:
            return _READERS[kind](text)
        except ValueError:
            continue
    wanted = " or ".join(sorted(types, key=_ORDER.index))
    raise ArgumentError(f"{key}={text!r}: expected {wanted}")


def type_label(prop: Mapping[str, Any]) -> str:
    """The JSON type(s) a property takes, for a person: ``integer``, ``integer|null``,
    ``any``."""
    types = _types(prop)
    return "|".join(sorted(types, key=_ORDER.index)) if types else "any"


def _types(prop: Mapping[str, Any]) -> set[str]:
    declared = prop.get("type")
    found: set[str] = set()
    if isinstance(declared, str):
        found.add(declared)
    elif isinstance(declared, list):
        found.update(t for t in declared if isinstance(t, str))
    for union in ("anyOf", "oneOf"):
        for option in prop.get(union) or ():
            if isinstance(option, Mapping):
                found |= _types(option)
    if "enum" in prop and not found:
        found.add("string")
    return found & set(_ORDER)


def _integer(text: str) -> int:
    return int(text.strip())


def _number(text: str) -> int | float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("not a finite number")
    return (
        int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
    )


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(text)


def _null(text: str) -> None:
    if text.strip() != "null":
        raise ValueError(text)


def _json_of(kind: type) -> Any:
    def read(text: str) -> Any:
        value = json.loads(text)
        if not isinstance(value, kind):
            raise ValueError(text)
        return value

    return read


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# The order in which a multi-typed value is tried: the stricter readings first.
_ORDER = ["null", "boolean", "integer", "number", "array", "object", "string"]
_READERS: dict[str, Any] = {
    "null": _null,
    "boolean": _boolean,
    "integer": _integer,
    "number": _number,
    "array": _json_of(list),
    "object": _json_of(dict),
    "string": str,
}
