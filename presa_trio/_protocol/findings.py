"""A finding of the capture checker: one problem on one line of a capture, and the stable
names of the rules that find them.

Pure values; the checker (capture.py) makes them, the command line and the public
``presa_trio.validation`` module print and export them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
