"""What a server serves: tools, resources, resource templates and prompts, and how to call them.

Each entry knows its wire description and how to turn a handler's return value into the
wire result. Method routing, admission and errors-to-responses live in the dispatcher.
"""

from __future__ import annotations

import base64
import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs

from . import _typeschema
from ._context import Context
from ._wire.headers import HeaderParam, header_params_of
from .errors import InvalidParams, McpError, ToolError

Handler = Callable[..., Any]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def _no_remote_refs(uri: str) -> Any:
    raise ValueError(f"remote $ref {uri!r} is not dereferenced (spec basic/index.mdx)")


def compile_argument_schema(schema: Mapping[str, Any]) -> Any:
    """A validator for tool arguments; remote ``$ref`` is never fetched."""
    try:
        return jsonschema_rs.validator_for(dict(schema), retriever=_no_remote_refs)
    except Exception as exc:  # invalid or unsupported-dialect schemas fail at declaration
        raise ValueError(f"invalid inputSchema: {exc}") from None


@dataclass(slots=True)
class Signature:
    """How to call a handler: which parameter takes the Context, which take arguments."""

    fn: Handler
    context_param: str | None
    names: frozenset[str]
    var_keyword: bool
    is_async: bool

    @classmethod
    def of(cls, fn: Handler) -> Signature:
        hints = _safe_hints(fn)
        context_param = None
        names: set[str] = set()
        var_keyword = False
        for param in inspect.signature(fn).parameters.values():
            if param.kind is param.VAR_KEYWORD:
                var_keyword = True
            elif param.kind is param.VAR_POSITIONAL:
                continue
            elif _is_context(param, hints):
                context_param = param.name
            else:
                names.add(param.name)
        return cls(fn, context_param, frozenset(names), var_keyword, _is_async(fn))

    async def call(self, ctx: Context, arguments: Mapping[str, Any]) -> Any:
        if self.var_keyword:
            kwargs = dict(arguments)
        else:
            kwargs = {k: v for k, v in arguments.items() if k in self.names}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        result = self.fn(**kwargs)
        if self.is_async:
            result = await result
        return result


def _is_async(fn: Handler) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


def _safe_hints(fn: Handler) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # unresolvable hints: fall back to the raw annotations
        return {}


def _is_context(param: inspect.Parameter, hints: Mapping[str, Any]) -> bool:
    """Annotated ``Context`` (also as an unresolved string, e.g. under TYPE_CHECKING)."""
    if hints.get(param.name) is Context:
        return True
    annotation = param.annotation
    return isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "Context"


@dataclass(slots=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    signature: Signature
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)  # read by extensions
    header_params: tuple[HeaderParam, ...] = ()
    validator: Any = None
    output_validator: Any = None
    wire: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _TOOL_NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-128 characters of [A-Za-z0-9_.-]")
        if self.input_schema.get("type") != "object":
            raise ValueError(f"inputSchema of {self.name!r} must have type 'object' at its root")
        self.header_params = header_params_of(self.input_schema)
        self.validator = compile_argument_schema(self.input_schema)
        if self.output_schema is not None:
            self.output_validator = compile_argument_schema(self.output_schema)
        wire: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            wire["title"] = self.title
        wire["description"] = self.description
        wire["inputSchema"] = self.input_schema  # verbatim: keywords must survive (SEP-2106)
        for key, value in (
            ("outputSchema", self.output_schema),
            ("annotations", self.annotations),
            ("icons", self.icons),
            ("_meta", self.meta),
        ):
            if value is not None:
                wire[key] = value
        self.wire = wire

    def argument_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        if self.validator.is_valid(arguments):
            return []
        return [
            f"{'/'.join(map(str, e.instance_path)) or '(root)'}: {e.message}"
            for e in self.validator.iter_errors(arguments)
        ]

    async def call(self, ctx: Context, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run the tool; a tool's own failure becomes ``isError: true`` (never a traceback)."""
        errors = self.argument_errors(arguments)
        if errors:
            return error_result("Invalid arguments: " + "; ".join(errors))
        try:
            value = await self.signature.call(ctx, arguments)
        except ToolError as exc:
            return error_result(str(exc) or f"Tool {self.name} failed")
        return self.result_of(value)

    def result_of(self, value: Any) -> dict[str, Any]:
        if isinstance(value, ToolResult):
            return value.to_wire()
        if self.output_schema is not None:
            structured = _typeschema.to_jsonable(value)
            errors = list(self.output_validator.iter_errors(structured))
            if errors:
                raise McpError(f"Tool {self.name} returned output that violates its outputSchema")
            return {
                "resultType": "complete",
                "content": [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}],
                "structuredContent": structured,
            }
        return {"resultType": "complete", "content": content_of(value)}


@dataclass(slots=True)
class ToolResult:
    """A full ``CallToolResult`` when a plain return value is not enough."""

    content: list[dict[str, Any]] = field(default_factory=list)
    structured: Any = None
    is_error: bool = False
    meta: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        result: dict[str, Any] = {"resultType": "complete", "content": self.content}
        if self.structured is not None:
            result["structuredContent"] = _typeschema.to_jsonable(self.structured)
        if self.is_error:
            result["isError"] = True
        if self.meta is not None:
            result["_meta"] = self.meta
        return result


def error_result(message: str) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "content": [{"type": "text", "text": message}],
        "isError": True,
    }


def _is_block(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str)


def content_of(value: Any) -> list[dict[str, Any]]:
    """Turn a handler's plain return value into content blocks."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if _is_block(value):
        return [value]
    if isinstance(value, list | tuple) and all(_is_block(v) or isinstance(v, str) for v in value):
        return [v if isinstance(v, dict) else {"type": "text", "text": v} for v in value]
    text = json.dumps(_typeschema.to_jsonable(value), ensure_ascii=False)
    return [{"type": "text", "text": text}]


@dataclass(slots=True)
class Resource:
    uri: str
    name: str
    signature: Signature
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    ttl_ms: int = 0
    cache_scope: str = "private"

    def describe(self) -> dict[str, Any]:
        return _describe({"uri": self.uri, "name": self.name}, self)

    async def read(self, ctx: Context, uri: str, variables: Mapping[str, str]) -> dict[str, Any]:
        value = await self.signature.call(ctx, variables)
        return {
            "resultType": "complete",
            "contents": contents_of(value, uri, self.mime_type),
            "ttlMs": self.ttl_ms,
            "cacheScope": self.cache_scope,
        }


def _describe(wire: dict[str, Any], entry: Resource | ResourceTemplate) -> dict[str, Any]:
    for key, value in (
        ("title", entry.title),
        ("description", entry.description),
        ("mimeType", entry.mime_type),
        ("size", getattr(entry, "size", None)),
        ("annotations", entry.annotations),
        ("_meta", entry.meta),
    ):
        if value is not None:
            wire[key] = value
    return wire


def contents_of(value: Any, uri: str, mime_type: str | None) -> list[dict[str, Any]]:
    def one(item: Any) -> dict[str, Any]:
        if isinstance(item, dict):
            return item
        entry: dict[str, Any] = {"uri": uri}
        if mime_type is not None:
            entry["mimeType"] = mime_type
        if isinstance(item, bytes | bytearray):
            entry["blob"] = base64.b64encode(item).decode("ascii")
        elif isinstance(item, str):
            entry["text"] = item
        else:
            entry["text"] = json.dumps(_typeschema.to_jsonable(item), ensure_ascii=False)
        return entry

    if isinstance(value, list):
        return [one(v) for v in value]
    return [one(value)]


_TEMPLATE_VAR = re.compile(r"\{([+#]?)([A-Za-z0-9_]+)\}")


@dataclass(slots=True)
class ResourceTemplate(Resource):
    """A parameterised resource, ``test://items/{id}``, matched by RFC 6570 level 1-2 rules."""

    pattern: re.Pattern[str] = field(default=re.compile(""))

    def __post_init__(self) -> None:
        parts: list[str] = []
        last = 0
        for match in _TEMPLATE_VAR.finditer(self.uri):
            parts.append(re.escape(self.uri[last : match.start()]))
            wide = match.group(1) == "+"
            parts.append(f"(?P<{match.group(2)}>{'.+' if wide else '[^/?#]+'})")
            last = match.end()
        parts.append(re.escape(self.uri[last:]))
        self.pattern = re.compile("".join(parts))

    def describe(self) -> dict[str, Any]:
        return _describe({"uriTemplate": self.uri, "name": self.name}, self)

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(uri)
        return None if found is None else found.groupdict()


@dataclass(slots=True)
class Prompt:
    name: str
    description: str
    signature: Signature
    arguments: list[dict[str, Any]]
    title: str | None = None
    meta: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            wire["title"] = self.title
        wire["description"] = self.description
        if self.arguments:
            wire["arguments"] = self.arguments
        if self.meta is not None:
            wire["_meta"] = self.meta
        return wire

    async def get(self, ctx: Context, arguments: Mapping[str, Any]) -> dict[str, Any]:
        missing = [
            a["name"] for a in self.arguments if a.get("required") and a["name"] not in arguments
        ]
        if missing:
            raise InvalidParams(f"Missing required prompt argument(s): {', '.join(missing)}")
        value = await self.signature.call(ctx, arguments)
        result: dict[str, Any] = {"resultType": "complete", "messages": messages_of(value)}
        return result


def prompt_arguments(fn: Handler) -> list[dict[str, Any]]:
    """Prompt arguments from a signature: every non-Context parameter is a string argument."""
    hints = _safe_hints(fn)
    found: list[dict[str, Any]] = []
    for param in inspect.signature(fn).parameters.values():
        if _is_context(param, hints) or param.kind in (
            param.VAR_KEYWORD,
            param.VAR_POSITIONAL,
        ):
            continue
        argument: dict[str, Any] = {"name": param.name}
        if param.default is param.empty:
            argument["required"] = True
        found.append(argument)
    return found


def messages_of(value: Any) -> list[dict[str, Any]]:
    """A prompt's return value as ``PromptMessage`` objects (one content block each)."""
    items = value if isinstance(value, list) else [value]
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": {"type": "text", "text": item}})
        elif isinstance(item, dict) and "role" in item:
            messages.append(item)
        elif _is_block(item):
            messages.append({"role": "user", "content": item})
        else:
            raise TypeError(f"a prompt cannot return {type(item).__name__}")
    return messages


Completer = Callable[[str, str, Mapping[str, str]], Awaitable[Any] | Any]
