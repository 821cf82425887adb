"""Builders for MCP content blocks and resource contents, as plain wire dicts.

Handlers may return these (or lists of them); presa_trio sends them as they are. They do
no I/O and no validation beyond base64-encoding bytes; the schema check happens on output.
"""

from __future__ import annotations

import base64
from typing import Any

__all__ = [
    "audio",
    "blob_contents",
    "embedded",
    "image",
    "resource_link",
    "text",
    "text_contents",
]


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def text(value: str, **extra: Any) -> dict[str, Any]:
    """A ``text`` content block."""
    return {"type": "text", "text": value, **extra}


def image(data: bytes | str, mime_type: str, **extra: Any) -> dict[str, Any]:
    """An ``image`` block; ``data`` is raw bytes or an already base64-encoded string."""
    return {"type": "image", "data": _b64(data), "mimeType": mime_type, **extra}


def audio(data: bytes | str, mime_type: str, **extra: Any) -> dict[str, Any]:
    """An ``audio`` block; ``data`` is raw bytes or an already base64-encoded string."""
    return {"type": "audio", "data": _b64(data), "mimeType": mime_type, **extra}


def text_contents(uri: str, value: str, mime_type: str | None = None) -> dict[str, Any]:
    """``TextResourceContents`` for a ``resources/read`` result or an embedded resource."""
    contents: dict[str, Any] = {"uri": uri, "text": value}
    if mime_type is not None:
        contents["mimeType"] = mime_type
    return contents


def blob_contents(uri: str, data: bytes | str, mime_type: str | None = None) -> dict[str, Any]:
    """``BlobResourceContents``; ``data`` is raw bytes or already base64-encoded."""
    contents: dict[str, Any] = {"uri": uri, "blob": _b64(data)}
    if mime_type is not None:
        contents["mimeType"] = mime_type
    return contents


def embedded(contents: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A ``resource`` block embedding text or blob contents."""
    return {"type": "resource", "resource": contents, **extra}


def resource_link(uri: str, name: str, **extra: Any) -> dict[str, Any]:
    """A ``resource_link`` block pointing at a resource the client may read."""
    return {"type": "resource_link", "uri": uri, "name": name, **extra}
