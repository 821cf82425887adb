"""What a strict test client (``presa_trio.testing``, ``strict=True``) checks in the result of
a ``tools/call``: an ``isError`` result is raised as ``ToolError``, and ``structuredContent``
must match the ``outputSchema`` the tool declared in ``tools/list``.

Spec 2026-07-28 server/tools.mdx (Output Schema: a server MUST return structured results
that conform to a declared schema). The clients hold one ``ToolOutputs`` each; it fetches the
tools' declarations once, through the client, on the first call that needs them. It does not
check arguments against ``inputSchema`` (the server does), nor results of tasks (SEP-2663).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, final

import jsonschema_rs
import trio

from ._asgi_driver import SchemaViolationError
from ._protocol.schema import Violation
from .errors import ToolError

Fetch = Callable[[], Awaitable[Sequence[Mapping[str, Any]]]]

#: How many ``tools/list`` pages a strict client reads before it calls the server broken.
MAX_PAGES = 100


class OutputSchemaError(SchemaViolationError):
    """A tool's ``structuredContent`` broke the ``outputSchema`` it declared (or was missing).

    ``tool`` names the tool; ``violations`` say where (a JSON pointer into the result, such
    as ``/structuredContent/celsius``) and why.
    """

    def __init__(self, tool: str, violations: Sequence[Violation]) -> None:
        self.tool = tool
        self.violations = list(violations)
        lines = "\n".join(f"  at {v.pointer}: {v.message}" for v in self.violations)
        super().__init__(f"tools/call {tool}: the result breaks the tool's outputSchema\n{lines}")


def _refuse_remote(uri: str) -> Any:
    raise ValueError(f"remote $ref {uri!r} is not fetched")


@final
class ToolOutputs:
    """The ``outputSchema`` of each tool of one server, as its ``tools/list`` declared them."""

    def __init__(self) -> None:
        self._schemas: dict[str, Any] | None = None
        self._validators: dict[str, Any] = {}

    def keep(self, tools: Sequence[Mapping[str, Any]]) -> None:
        """Keep the declarations of ``tools`` (the ``tools`` of a whole ``tools/list``)."""
        self._schemas = {
            tool["name"]: tool["outputSchema"]
            for tool in tools
            if isinstance(tool.get("name"), str) and isinstance(tool.get("outputSchema"), Mapping)
        }
        self._validators = {}

    async def check(self, name: str, result: Mapping[str, Any], fetch: Fetch) -> None:
        """Raise ``ToolError`` for an ``isError`` result, ``OutputSchemaError`` for
        ``structuredContent`` that breaks the tool's declared ``outputSchema``. A result that
        is not final (``input_required``, a task) passes; ``fetch`` lists the tools, once."""
        await trio.lowlevel.checkpoint()
        if result.get("resultType", "complete") != "complete" or "task" in result:
            return
        if result.get("isError") is True:
            raise ToolError(_error_text(name, result))
        if self._schemas is None:
            self.keep(await fetch())
        assert self._schemas is not None
        schema = self._schemas.get(name)
        if schema is None:
            return
        if "structuredContent" not in result:
            missing = "missing, but the tool declares an outputSchema"
            raise OutputSchemaError(
                name, [Violation("outputSchema", "/structuredContent", missing)]
            )
        validator = self._validator(name, schema)
        structured = result["structuredContent"]
        if validator.is_valid(structured):
            return
        raise OutputSchemaError(
            name,
            [
                Violation(
                    "outputSchema", _pointer(["structuredContent", *e.instance_path]), e.message
                )
                for e in validator.iter_errors(structured)
            ],
        )

    def _validator(self, name: str, schema: Mapping[str, Any]) -> Any:
        validator = self._validators.get(name)
        if validator is None:
            try:
                validator = jsonschema_rs.validator_for(dict(schema), retriever=_refuse_remote)
            except Exception as exc:  # the server declared something that is no schema
                why = f"not a JSON Schema this client can use: {exc}"
                raise OutputSchemaError(name, [Violation("outputSchema", "", why)]) from None
            self._validators[name] = validator
        return validator


def _pointer(path: Sequence[object]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _error_text(name: str, result: Mapping[str, Any]) -> str:
    """The text blocks of an error result, one per line (a fallback when it has none)."""
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    texts = [
        b["text"]
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(texts) or f"tool {name} answered isError: true, with no text"


async def list_all_tools(request: Callable[..., Awaitable[Mapping[str, Any]]]) -> list[Any]:
    """Every tool of a server, page after page, through a client's ``request(method,
    params)``; a server that never stops paging is an error, not a hang."""
    tools: list[Any] = []
    params: dict[str, Any] = {}
    for _ in range(MAX_PAGES):
        result = await request("tools/list", params)
        tools += [t for t in result.get("tools") or () if isinstance(t, Mapping)]
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str):
            return tools
        params = {"cursor": cursor}
    raise AssertionError(f"tools/list was still paging after {MAX_PAGES} pages")
