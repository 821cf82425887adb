"""A finding of the capture checker: one problem on one line of a capture, and the stable
names of the rules that find them.

Pure values; the checker (capture.py) collects them line by line (``LineFindings``), the
command line and the public ``presa_trio.validation`` module print and export them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .schema import Schemas

#: The rules, by stable short name (printed, written to JSON and JUnit; never reworded).
RULES: dict[str, str] = {
    "json": "the line is not JSON",
    "capture": "the line is not a message or a capture record",
    "schema": "the message breaks its $def in the schema of its protocol version",
    "result-type": "a resultType that neither the core nor a declared extension defines",
    "unknown-method": "a method that neither the core nor a declared extension defines",
    "direction": "a message the side that sent it may not send",
    "output-schema": "structuredContent breaks the tool's declared outputSchema",
    "input-schema": "arguments break the tool's declared inputSchema",
    "tool-schema": "a tool declares an inputSchema or outputSchema that cannot be compiled",
    "progress-token": "progress for a token no request in flight sent",
    "id-reused": "a request id reused while the earlier request with that id is in flight",
    "orphan-response": "a response to no request",
    "http-status": "an HTTP status that disagrees with the message (or its absence)",
    "header": "an HTTP header that is missing or disagrees with the body",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem on one line: where in the message (a JSON pointer into the line's
    message), against which ``$def`` (or the header or rule it concerns), and why."""

    line: int
    definition: str
    pointer: str
    message: str
    direction: str | None = None
    rule: str = "schema"

    def __str__(self) -> str:
        return f"{self.line}: {self.definition} at {self.pointer or '/'}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        """The finding as JSON data (``presa-trio validate --json`` writes one per line)."""
        return {
            "line": self.line,
            "rule": self.rule,
            "direction": self.direction,
            "definition": self.definition,
            "pointer": self.pointer,
            "message": self.message,
        }


class LineFindings:
    """The findings of one line as the checker collects them, each (pointer, message) once."""

    __slots__ = ("direction", "found", "number", "seen")

    def __init__(self, number: int) -> None:
        self.number = number
        self.direction: str | None = None
        self.found: list[Finding] = []
        self.seen: set[tuple[str, str]] = set()

    def add(self, definition: str, pointer: str, message: str, rule: str) -> None:
        if (pointer, message) in self.seen:
            return
        self.seen.add((pointer, message))
        self.found.append(Finding(self.number, definition, pointer, message, self.direction, rule))

    def schema(self, schemas: Schemas, definition: str, instance: object, prefix: str) -> None:
        """A ``schema`` finding for each way ``instance`` fails ``definition``, its pointer
        under ``prefix`` (``/result``)."""
        for violation in schemas.violations(definition, instance):
            self.add(definition, prefix + violation.pointer, violation.message, "schema")
