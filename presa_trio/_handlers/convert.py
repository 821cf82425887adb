"""Arguments as the types a handler's parameters are hinted as: a dataclass arrives as that
dataclass, an ``Enum`` as its member, a ``list`` for a ``tuple`` as a tuple, ``"5"`` for an
``int`` as 5 (pydantic's lax mode, as the MCP Python SDK converts).

One pydantic ``TypeAdapter`` per handler, built when it is declared; a call whose parameters
JSON already gives as they are hinted (``str``, ``int``, ``list[str]``...) skips it. And the
other way, ``to_jsonable``: a handler's structured return value as plain JSON data. What is
valid on the wire is the tool's inputSchema's business (the registry checks it); this module
never calls the handler.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import enum
import inspect
import json
import logging
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, final

import pydantic_core
import typing_extensions
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from .adapt import ADAPT_ERRORS, adapter_for, readable
from .typeschema import Param

__all__ = ["ArgumentError", "Binder", "to_jsonable"]

logger = logging.getLogger("presa_trio")

EMPTY = inspect.Parameter.empty
_QUALIFIERS = ("Required", "NotRequired", "ReadOnly")
_UNION = (typing.Union, types.UnionType)
_LISTS = (list, cabc.Sequence, cabc.MutableSequence)
_MAPPINGS = (dict, cabc.Mapping, cabc.MutableMapping)
_CONTAINERS = (*_LISTS, *_MAPPINGS, tuple, set, frozenset, cabc.Set, cabc.MutableSet)


@final
class ArgumentError(Exception):
    """Arguments that do not convert. Each of ``problems`` names the field and what is wrong."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@final
class Binder:
    """Turns the arguments of one handler into its keyword arguments.

    ``parameters`` are ``(name, annotation, default)`` as ``Signature`` reads them. With
    ``var_keyword`` (a ``**kwargs`` parameter) undeclared arguments pass through unconverted.
    A parameter whose type pydantic cannot convert is passed as JSON data, as before (logged
    once, here).
    """

    __slots__ = (
        "_adapter",
        "_ints",
        "_json_as_is",
        "_json_text",
        "_strings_as_is",
        "names",
        "var_keyword",
    )

    def __init__(
        self,
        parameters: Sequence[tuple[str, object, object]],
        var_keyword: bool = False,
        label: str = "handler",
    ) -> None:
        self.names = frozenset(name for name, _, _ in parameters)
        self.var_keyword = var_keyword
        passed: set[str] = set()
        self._adapter = _adapter(parameters, var_keyword, label, passed)
        hints = [(name, tp) for name, tp, _ in parameters if name not in passed]
        # Without an adapter there is nothing to convert to (all passed, or no parameters).
        none = self._adapter is None
        self._json_as_is = none or all(_json_as_is(tp) for _, tp in hints)
        self._strings_as_is = none or all(_strings_as_is(tp) for _, tp in hints)
        self._json_text = frozenset(name for name, tp in hints if _is_container(tp))
        self._ints = tuple(name for name, tp in hints if _is_int(tp))

    @property
    def can_convert(self) -> bool:
        return self._adapter is not None

    def pick(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments the handler takes, as they are (a new dict: the caller adds to it)."""
        names = self.names
        if self.var_keyword or arguments.keys() <= names:  # a set operation, in C
            return dict(arguments)
        return {k: v for k, v in arguments.items() if k in names}

    def from_json(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Arguments that passed the tool's inputSchema, converted where their hint asks.

        The per-call path of every tool call: no pydantic when JSON already is the type.
        """
        names = self.names  # pick(), inlined: one call less on every tool call
        if self.var_keyword or arguments.keys() <= names:
            kwargs = dict(arguments)
        else:
            kwargs = {k: v for k, v in arguments.items() if k in names}
        if self._json_as_is:
            for name in self._ints:  # 5.0 passed the schema as an integer
                if type(kwargs.get(name)) is float:
                    kwargs[name] = int(kwargs[name])
            return kwargs
        assert self._adapter is not None  # not as is: there is an adapter
        return _validated(self._adapter.validate_python, kwargs)

    def from_lax_json(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Arguments that failed the inputSchema, given pydantic's lax second chance: ``"5"``
        for an ``int``, and (as the SDK does for clients that send them so) a JSON text for a
        list or an object. Unknown arguments are refused unless there is ``**kwargs``.
        """
        if self._adapter is None:  # see can_convert
            raise ArgumentError(["(root): these arguments are not converted"])
        data = dict(arguments)
        for name in self._json_text & data.keys():
            value = data[name]
            if isinstance(value, str):
                try:
                    parsed = json.loads(value)
                except (ValueError, RecursionError):
                    continue
                if isinstance(parsed, list | dict):
                    data[name] = parsed
        return _validated(self._adapter.validate_python, data)

    def from_strings(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """String arguments (a prompt's, a resource template's variables) converted to their
        hints: ``"5"`` for ``count: int``, ``"2026-07-28"`` for a ``date``."""
        kwargs = self.pick(arguments)
        if self._strings_as_is:
            return kwargs
        assert self._adapter is not None
        return _validated(self._adapter.validate_strings, kwargs)

    def to_json(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Converted arguments written back as JSON data, to check them against the schema."""
        if self._adapter is None:
            return dict(kwargs)
        data: dict[str, Any] = self._adapter.dump_python(
            kwargs, mode="json", by_alias=True, warnings=False
        )
        return data


def _validated(validate: typing.Callable[[Any], Any], data: dict[str, Any]) -> dict[str, Any]:
    try:
        converted: dict[str, Any] = validate(data)
    except ValidationError as exc:
        raise ArgumentError(_problems(exc)) from None
    return converted


def _problems(exc: ValidationError) -> list[str]:
    """pydantic's errors as ``field/path: what is wrong``, without its echo of the input."""
    found: list[str] = []
    for error in exc.errors(include_url=False, include_context=False, include_input=False):
        where = "/".join(str(part) for part in error["loc"]) or "(root)"
        found.append(f"{where}: {error['msg']}")
    return found


# ---------------------------------------------------------------------- the adapter


def _adapter(
    parameters: Sequence[tuple[str, object, object]],
    var_keyword: bool,
    label: str,
    passed: set[str],
) -> TypeAdapter[Any] | None:
    """One adapter over all parameters: a TypedDict of them, optional where there is a default
    (the function's own default applies when an argument is absent).

    A parameter pydantic cannot convert is typed ``Any`` in it and named in ``passed``.
    """
    if not parameters:
        return None
    hints = {name: readable(tp) for name, tp, _ in parameters}
    try:
        return _typed_dict_adapter(parameters, hints, var_keyword, label)
    except ADAPT_ERRORS:
        pass
    for name, tp, _ in parameters:
        try:
            adapter_for(tp)
        except TypeError as exc:
            logger.warning("parameter %r of %s is passed unconverted: %s", name, label, exc)
            hints[name] = Any
            passed.add(name)
    try:
        return _typed_dict_adapter(parameters, hints, var_keyword, label)
    except ADAPT_ERRORS as exc:  # pragma: no cover - each parameter converts on its own
        logger.warning("the arguments of %s are passed unconverted: %s", label, exc)
        passed.update(hints)
        return None


def _typed_dict_adapter(
    parameters: Sequence[tuple[str, object, object]],
    hints: Mapping[str, object],
    var_keyword: bool,
    label: str,
) -> TypeAdapter[Any]:
    fields = {
        name: hints[name] if default is EMPTY else typing_extensions.NotRequired[hints[name]]
        for name, _, default in parameters
    }
    make: Any = typing_extensions.TypedDict  # the functional form: fields are computed
    arguments: Any = make(f"{label} arguments", fields)
    arguments.__pydantic_config__ = ConfigDict(extra="allow" if var_keyword else "forbid")
    return TypeAdapter(arguments)


# ---------------------------------------------------------------------- what needs no work


def _plain_metadata(metadata: Sequence[object]) -> bool:
    """Metadata that only annotates the schema: pydantic's (``Field``, constraints,
    validators) may change or refuse a value, so it goes through the adapter."""
    return all(isinstance(m, Param | Mapping | str) for m in metadata)


def _unwrapped(tp: object) -> object:
    """``tp`` without ``NewType`` and TypedDict qualifiers around it."""
    while True:
        if isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        elif getattr(typing.get_origin(tp), "_name", None) in _QUALIFIERS:
            tp = typing.get_args(tp)[0]
        else:
            return tp


def _is_typeddict(tp: object) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _is_int(tp: object) -> bool:
    """``int``, ``int | None`` or either annotated with schema-only metadata."""
    tp = _unwrapped(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _plain_metadata(args[1:]) and _is_int(args[0])
    if origin in _UNION:
        arms = [a for a in args if a is not type(None)]
        return len(arms) == 1 and _is_int(arms[0])
    return tp is int


def _json_as_is(tp: object, nested: bool = False, active: tuple[type, ...] = ()) -> bool:
    """Is a JSON value that matches this type's schema already a value of this type?

    Not quite for ``int``: 5.0 is an integer to JSON Schema. A top-level ``int`` counts (the
    binder turns such a float into an int itself, cheaply); a nested one needs the adapter.
    """
    tp = _unwrapped(tp)
    if _is_int(tp):
        return not nested
    if tp in (Any, object, str, float, bool, None, type(None)):
        return True  # an int for a float is a float to a type checker
    if isinstance(tp, str | typing.ForwardRef):
        return True  # unresolved: nothing to convert to
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _plain_metadata(args[1:]) and _json_as_is(args[0], nested, active)
    if origin is typing.Literal:
        return not any(isinstance(a, enum.Enum) for a in args)
    if origin in _UNION:
        return all(_json_as_is(a, True, active) for a in args)
    if (origin or tp) in _LISTS:
        return all(_json_as_is(a, True, active) for a in args)
    if (origin or tp) in _MAPPINGS:
        return not args or _json_as_is(args[1], True, active)
    if _is_typeddict(tp):
        assert isinstance(tp, type)
        if tp in active:
            return True
        try:
            hints = typing.get_type_hints(tp, include_extras=True)
        except NameError:
            return True
        return all(_json_as_is(h, True, (*active, tp)) for h in hints.values())
    return False


def _strings_as_is(tp: object) -> bool:
    """Is a string a value of this type as it is?"""
    tp = _unwrapped(tp)
    if tp in (Any, object, str) or isinstance(tp, str | typing.ForwardRef):
        return True
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _plain_metadata(args[1:]) and _strings_as_is(args[0])
    if origin in _UNION:
        return all(a is type(None) or _strings_as_is(a) for a in args)
    return False


def _is_container(tp: object) -> bool:
    """Is this an array or an object on the wire (so that a JSON text for it may be parsed)?"""
    tp = _unwrapped(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _is_container(args[0])
    if origin in _UNION:
        return any(_is_container(a) for a in args)
    if (origin or tp) in _CONTAINERS:
        return True
    return isinstance(tp, type) and (
        _is_typeddict(tp) or dataclasses.is_dataclass(tp) or issubclass(tp, BaseModel)
    )


# ---------------------------------------------------------------------- values to JSON


def to_jsonable(value: object) -> object:
    """A tool's structured return value as plain JSON data (dicts, lists and scalars).

    What is not a dataclass, enum, mapping or collection (a pydantic model, ``datetime``,
    ``UUID``, ``Decimal``, ``Path``) is written as pydantic writes it; anything pydantic
    cannot write either is handed back as it is (``json.dumps`` then refuses it).
    """
    if type(value) in _LEAVES:
        return value
    # plain lists and dicts first: most of a structure, and no ABC check for them; their
    # leaves stay where they are, without a call each
    if type(value) is list:
        return [v if type(v) in _LEAVES else to_jsonable(v) for v in value]
    if type(value) is dict:
        return _jsonable_mapping(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # field by field: ``dataclasses.asdict`` would deep-copy every value first
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, Mapping):
        return _jsonable_mapping(value)
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        items: list[Any] = [to_jsonable(v) for v in value]
        with contextlib.suppress(TypeError):  # unorderable items keep iteration order
            items.sort()
        return items
    try:
        return pydantic_core.to_jsonable_python(value, by_alias=True)
    except pydantic_core.PydanticSerializationError:
        return value


def _jsonable_mapping(value: Mapping[Any, Any]) -> dict[Any, object]:
    """A mapping's items as JSON data, an enum key by its value."""
    return {
        (k.value if isinstance(k, enum.Enum) else k): v if type(v) in _LEAVES else to_jsonable(v)
        for k, v in value.items()
    }


_LEAVES = frozenset({str, int, float, bool, type(None)})  # JSON's scalars, these types exactly
