"""Checking a capture of MCP messages against the vendored schema (``presa-trio validate``).

A capture is JSON lines. A line is either a bare JSON-RPC message, whose side is inferred, or
``{"direction": "client"|"server", "message": {...}}``. Results are checked against the result
type of the request with the same id seen earlier in the capture. Pure: lines in, findings out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, final

from .schema import Schemas, error_definition

CLIENT, SERVER = "client", "server"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem on one line: where in the message, against which ``$def``, and why."""

    line: int
    definition: str
    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.line}: {self.definition} at {self.pointer or '/'}: {self.message}"


@final
class CaptureChecker:
    """Walks a capture line by line, remembering request ids to type their responses."""

    def __init__(self, schemas: Schemas | None = None) -> None:
        self.schemas = schemas if schemas is not None else Schemas()
        self.requests = self.schemas.request_definitions()
        self.server_notifications = self.schemas.notification_definitions()
        self.results = self.schemas.result_definitions()
        self.pending: dict[Any, str] = {}  # request id -> method, from client lines
        self.lines = 0

    def check(self, lines: Iterable[str]) -> Iterator[Finding]:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            self.lines += 1
            yield from self.check_line(number, raw)

    def check_line(self, number: int, raw: str) -> Iterator[Finding]:
        try:
            value = json.loads(raw)
        except ValueError as exc:
            yield Finding(number, "JSON", "", f"not JSON: {exc}")
            return
        direction, message = _unwrap(value)
        if not isinstance(message, dict):
            yield Finding(number, "JSONRPCMessage", "", "a message must be a JSON object")
            return
        direction = direction or _infer(message)
        if direction == SERVER and "id" in message and "method" in message:
            yield Finding(number, "ServerNotification", "/id", "servers must not send requests")
            return
        definition, instance = self._definition(direction, message)
        for violation in self.schemas.violations(definition, instance):
            pointer = violation.pointer if instance is message else "/result" + violation.pointer
            yield Finding(number, definition, pointer, violation.message)

    def _definition(self, direction: str, message: Mapping[str, Any]) -> tuple[str, Any]:
        method = message.get("method")
        if "id" in message and isinstance(method, str):  # a request
            self.pending[message["id"]] = method
            return self.requests.get(method, "JSONRPCRequest"), message
        if isinstance(method, str):  # a notification
            if direction == SERVER:
                return self.server_notifications.get(method, "JSONRPCNotification"), message
            return (
                "ClientNotification"
                if method == "notifications/cancelled"
                else "JSONRPCNotification"
            ), message
        if "error" in message:
            code = message["error"].get("code") if isinstance(message["error"], dict) else None
            return error_definition(code), message
        if "result" in message and isinstance(message["result"], dict):
            request_method = self.pending.pop(message.get("id"), None)
            result = message["result"]
            if result.get("resultType") == "input_required":
                return "InputRequiredResult", result
            if result.get("resultType") == "complete" and request_method in self.results:
                return self.results[request_method], result
            return "JSONRPCResultResponse", message
        return "JSONRPCMessage", message


def _unwrap(value: object) -> tuple[str | None, object]:
    if (
        isinstance(value, dict)
        and "message" in value
        and value.get("direction") in (CLIENT, SERVER)
    ):
        return value["direction"], value["message"]
    return None, value


def _infer(message: Mapping[str, Any]) -> str:
    """Requests come from clients (servers never send them); responses from servers."""
    if "result" in message or "error" in message:
        return SERVER
    if "id" in message:
        return CLIENT
    method = message.get("method")
    return CLIENT if method == "notifications/cancelled" else SERVER
