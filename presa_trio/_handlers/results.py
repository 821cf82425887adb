"""What a handler's return value becomes on the wire: content blocks, resource contents, prompt
messages, and the ``CallToolResult`` shape (spec 2026-07-28 server/tools.mdx, resources.mdx,
prompts.mdx).

Pure functions over plain values; they never call a handler, validate against the core schema
or touch ``_meta`` (the dispatcher stamps results on the way out).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, final

from .._protocol.dialect import COMPLETE
from .convert import to_jsonable

_NOT_GIVEN: Any = object()  # ``content_of``'s ``jsonable``, when the caller has none


@final
@dataclass(slots=True)
class ToolResult:
    """A full ``CallToolResult`` when a plain return value is not enough."""

    content: list[dict[str, Any]] = field(default_factory=list)
    structured: Any = None
    is_error: bool = False
    meta: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        result = call_result(self.content)
        if self.structured is not None:
            result["structuredContent"] = to_jsonable(self.structured)
        if self.is_error:
            result["isError"] = True
        if self.meta is not None:
            result["_meta"] = self.meta
        return result


def call_result(content: list[dict[str, Any]]) -> dict[str, Any]:
    """A complete ``CallToolResult``. It carries its own ``resultType`` because a task stores
    it inside ``tasks/get`` results, where no dispatcher stamps it."""
    return {"resultType": COMPLETE, "content": content}


def error_result(message: str) -> dict[str, Any]:
    """A tool's own failure, shown to the model: ``isError: true`` with one text block."""
    result = call_result([{"type": "text", "text": message}])
    result["isError"] = True
    return result


def structured_result(value: Any) -> dict[str, Any]:
    """A result with ``structuredContent`` and its text mirror (spec server/tools.mdx)."""
    result = call_result([{"type": "text", "text": json.dumps(value, ensure_ascii=False)}])
    result["structuredContent"] = value
    return result


def _is_block(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str)


def content_of(value: Any, jsonable: Any = _NOT_GIVEN) -> list[dict[str, Any]]:
    """Turn a handler's plain return value into content blocks; ``jsonable`` is
    ``to_jsonable(value)`` when the caller has it already."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if _is_block(value):
        return [value]
    if isinstance(value, list | tuple) and all(_is_block(v) or isinstance(v, str) for v in value):
        return [v if isinstance(v, dict) else {"type": "text", "text": v} for v in value]
    if jsonable is _NOT_GIVEN:
        jsonable = to_jsonable(value)
    return [{"type": "text", "text": json.dumps(jsonable, ensure_ascii=False)}]


def contents_of(value: Any, uri: str, mime_type: str | None) -> list[dict[str, Any]]:
    """A resource handler's return value as ``contents`` (text, blob, or given as is)."""

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
            entry["text"] = json.dumps(to_jsonable(item), ensure_ascii=False)
        return entry

    if isinstance(value, list):
        return [one(v) for v in value]
    return [one(value)]


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
