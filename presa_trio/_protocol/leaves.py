"""JSON pointers to the leaf at fault under a union (``anyOf``/``oneOf``): the branch the
instance's discriminator picks is reported, not "not valid under any of the schemas".

``content[0].text = 3`` reads "3 is not of type string" at ``/content/0/text``; a task's
``status: "bogus"`` reads "is not one of working, ..." at ``/status``. Pure: errors of
``jsonschema-rs`` and the schema they came from in, ``(path, reason)`` pairs out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

#: The members a union's branches are told apart by: a ``const`` (or ``enum``) on one of these
#: names in each branch (content ``type``, elicitation ``action``, request ``method``, result
#: ``resultType``, task ``status``).
DISCRIMINATORS = ("type", "action", "method", "resultType", "status")
_UNIONS = ("AnyOf", "OneOfNotValid")
_NAMED_VALUE = ("Constant", "Enum")

Leaf = tuple[list[object], str]


def _kind(error: Any) -> str:
    return type(error.kind).__name__


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def leaves(error: Any, root: Mapping[str, Any]) -> Iterator[Leaf]:
    """The reasons behind one error of a validator compiled from ``root``, down to the
    leaves."""
    path = list(error.instance_path)
    context = getattr(error.kind, "context", None) if _kind(error) in _UNIONS else None
    if context:
        branches = [list(branch) for branch in context]
        instance = error.instance
        if isinstance(instance, dict):
            schemas = _union_at(root, list(error.schema_path))
            chosen = _by_discriminator(root, path, instance, branches, schemas)
            if isinstance(chosen, tuple):
                yield chosen
                return
            if chosen is not None:
                for inner in chosen:
                    yield from leaves(inner, root)
                return
        else:
            expected = _expected_values(path, branches)
            if expected:
                yield path, f"{_json(instance)} is not one of {', '.join(expected)}"
                return
    yield path, error.message


def _walk(root: Mapping[str, Any], path: list[object]) -> Any:
    node: Any = root
    for part in path:
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if not (in_list or (isinstance(node, dict) and part in node)):
            return None
        node = node[part]
    return node


def _resolve(root: Mapping[str, Any], schema: Any) -> Any:
    """``schema`` with its local ``$ref`` followed (a few hops at most)."""
    for _ in range(8):
        if not isinstance(schema, dict):
            return None
        ref = schema.get("$ref")
        if not (isinstance(ref, str) and ref.startswith("#/")):
            return schema
        schema = _walk(root, [p.replace("~1", "/").replace("~0", "~") for p in ref[2:].split("/")])
    return None


def _union_at(root: Mapping[str, Any], schema_path: list[object]) -> list[Any] | None:
    """The branch schemas of the union an error's ``schema_path`` names, if it resolves."""
    node = _walk(root, schema_path)
    return node if isinstance(node, list) else None


def _allowed(root: Mapping[str, Any], schema: Any, key: str) -> list[Any] | None:
    """The values a branch allows for ``key`` (its ``const`` or ``enum``, also inside
    ``allOf``); None when the branch does not name the key."""
    schema = _resolve(root, schema)
    if not isinstance(schema, dict):
        return None
    prop = _resolve(root, schema.get("properties", {}).get(key))
    if isinstance(prop, dict):
        if "const" in prop:
            return [prop["const"]]
        if isinstance(prop.get("enum"), list):
            return list(prop["enum"])
    for part in schema.get("allOf", ()):
        found = _allowed(root, part, key)
        if found is not None:
            return found
    return None


def _by_discriminator(
    root: Mapping[str, Any],
    path: list[object],
    instance: dict[str, Any],
    branches: list[list[Any]],
    schemas: list[Any] | None,
) -> list[Any] | Leaf | None:
    """The branch whose discriminator the instance's value names (the fewest errors if
    several); or, when branches name the discriminator and none the instance's value, one
    reason at that member; None when no discriminator decides."""
    present = [key for key in DISCRIMINATORS if key in instance]
    if schemas is None or len(schemas) != len(branches):
        return _by_refusals(path, instance, branches, present)
    for key in present:
        allowed = [_allowed(root, schema, key) for schema in schemas]
        if all(values is None for values in allowed):
            continue
        value = instance[key]
        fitting = [
            branch
            for branch, values in zip(branches, allowed, strict=True)
            if values is not None and any(value == v and type(value) is type(v) for v in values)
        ]
        if fitting:
            return min(fitting, key=len)
        expected = [_json(v) for values in allowed if values for v in values]
        return [*path, key], f"{_json(value)} is not one of {', '.join(dict.fromkeys(expected))}"
    return None


def _by_refusals(
    path: list[object], instance: dict[str, Any], branches: list[list[Any]], present: list[str]
) -> list[Any] | Leaf | None:
    """The same choice read from the errors alone (a union the schema path does not lead to):
    the branches that do not refuse the instance's discriminator value."""
    if not present:
        return None
    depth = len(path) + 1

    def refused(branch: list[Any]) -> str | None:
        for inner in branch:
            inner_path = list(inner.instance_path)
            named = _kind(inner) in _NAMED_VALUE
            if named and len(inner_path) == depth and inner_path[-1] in present:
                return str(inner_path[-1])
        return None

    matching = [branch for branch in branches if refused(branch) is None]
    if matching:
        return min(matching, key=len)
    keys = {refused(branch) for branch in branches}
    if len(keys) == 1:
        (key,) = keys
        assert key is not None
        expected = _expected_values([*path, key], branches)
        if expected:
            return [*path, key], f"{_json(instance[key])} is not one of {', '.join(expected)}"
    return None


def _expected_values(path: list[object], branches: list[list[Any]]) -> list[str]:
    """Each branch's allowed value at ``path``, when every branch refuses the value there
    for naming another one; else empty."""
    expected: list[str] = []
    for branch in branches:
        named = [
            inner
            for inner in branch
            if list(inner.instance_path) == path and _kind(inner) in _NAMED_VALUE
        ]
        if not named:
            return []
        for inner in named:
            values = getattr(inner.kind, "expected_value", None)
            if values is None:
                values = getattr(inner.kind, "options", None)
            text = _json(values) if values is not None else inner.message
            if text not in expected:
                expected.append(text)
    return expected
