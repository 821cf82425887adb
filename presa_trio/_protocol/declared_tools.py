"""The tools a ``tools/list`` result declared in a capture, with their ``inputSchema`` and
``outputSchema`` compiled, so later calls can be checked against them.

Pure: no schema is fetched (a remote ``$ref`` is refused, reported as a schema that cannot be
compiled). spec 2026-07-28 server/tools.mdx (output schema, structured content).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, final

from .schema import Violation, compile_schema, violations_of


@final
@dataclass(frozen=True, slots=True)
class DeclaredTool:
    name: str
    input_schema: Any  # a compiled validator, or None
    output_schema: Any

    def input_violations(self, arguments: object) -> list[Violation]:
        if self.input_schema is None:
            return []
        return violations_of(self.input_schema, arguments, "inputSchema")

    def output_violations(self, structured: object) -> list[Violation]:
        if self.output_schema is None:
            return []
        return violations_of(self.output_schema, structured, "outputSchema")


def declare(tools: object, into: dict[str, DeclaredTool]) -> Iterator[tuple[str, str]]:
    """Record each well-formed tool of a ``tools/list`` result in ``into`` (by name, the
    latest declaration winning); yield ``(pointer, reason)`` for a schema that cannot be
    compiled, the pointer under the result."""
    if not isinstance(tools, list):
        return
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        compiled: dict[str, Any] = {}
        for key in ("inputSchema", "outputSchema"):
            schema = tool.get(key)
            compiled[key] = None
            if isinstance(schema, Mapping):
                try:
                    compiled[key] = compile_schema(schema)
                except ValueError as exc:
                    yield f"/tools/{index}/{key}", f"cannot be compiled: {exc}"
        into[tool["name"]] = DeclaredTool(
            tool["name"], compiled["inputSchema"], compiled["outputSchema"]
        )
