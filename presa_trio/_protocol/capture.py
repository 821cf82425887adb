"""Checking a capture of MCP traffic (``presa-trio validate``, ``presa_trio.validation``).

Each line is checked against the schema of its protocol version (2026-07-28, or 2025-11-25 /
2025-06-18 as negotiated), a result against the typed result of the request it answers, a
Tasks-extension message against the extension's schema (``schema/README.md``); and across
lines: tool calls against the schemas ``tools/list`` declared, progress tokens, request ids
in flight, responses to no request, and where the capture has them, HTTP statuses and
headers. This module reads lines and hands each message to capture_requests.py,
capture_notifications.py or capture_responses.py. Pure: lines in, findings out; it reads no
file and keeps no clock (a record's ``t`` is the writer's).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, final

from .capture_http import empty_response
from .capture_notifications import check_notification
from .capture_records import CLIENT, SERVER, Record, read_record
from .capture_requests import check_request
from .capture_responses import check_response
from .capture_state import CaptureState, kind_of
from .findings import Finding, LineFindings
from .schema import Schemas

__all__ = ["CaptureChecker", "Finding", "check_capture"]


@final
class CaptureChecker:
    """Walks a capture line by line, remembering what earlier lines said.

    ``version`` forces one protocol revision's schema for every line (else each line's is
    read from the traffic: the ``initialize`` exchange, a request's ``_meta``, the
    ``MCP-Protocol-Version`` header). ``schemas`` is a 2026-07-28 ``Schemas`` to reuse.
    """

    def __init__(self, schemas: Schemas | None = None, *, version: str | None = None) -> None:
        self.state = CaptureState(schemas, version)
        self.lines = 0

    def check(self, lines: Iterable[str]) -> Iterator[Finding]:
        """Each finding of ``lines`` (numbered from 1; blank lines are skipped)."""
        for number, raw in enumerate(lines, start=1):
            if raw.strip():
                yield from self.check_line(number, raw)

    def check_line(self, number: int, raw: str) -> Iterator[Finding]:
        """The findings of one line of JSON (line ``number`` of the capture)."""
        self.lines += 1
        try:
            value = json.loads(raw)
        except ValueError as exc:
            yield Finding(number, "JSON", "", f"not JSON: {exc}", None, "json")
            return
        yield from self._check(number, value)

    def check_record(self, number: int, record: Mapping[str, Any]) -> Iterator[Finding]:
        """The findings of one parsed line: a bare JSON-RPC message or a capture record."""
        self.lines += 1
        yield from self._check(number, record)

    def _check(self, number: int, value: object) -> Iterator[Finding]:
        record = read_record(value)
        if isinstance(record, str):
            yield Finding(number, "capture record", "", record, None, "capture")
            return
        out = LineFindings(number)
        self._line(out, record)
        yield from out.found

    def _line(self, out: LineFindings, record: Record) -> None:
        state = self.state
        message = record.message
        out.direction = record.direction
        if message is None:
            if record.direction == SERVER and record.has_http:
                empty_response(state, out, record)
            return
        if not isinstance(message, dict):
            out.add("JSONRPCMessage", "", "a message must be a JSON object", "schema")
            return
        kind = kind_of(message)
        direction = record.direction or state.infer(message, kind)
        out.direction = direction
        if kind == "request":
            check_request(state, out, record, message, direction)
        elif kind == "notification":
            check_notification(state, out, record, message, direction)
        elif kind == "response":
            check_response(state, out, record, message, direction)
        else:
            catalog = state.catalog(state.version(record, message))
            out.schema(catalog.schemas, "JSONRPCMessage", message, "")
            if direction == CLIENT:
                state.traffic.note_exchange(record, "other", catalog)


def check_capture(lines: Iterable[str], *, version: str | None = None) -> list[Finding]:
    """Every finding of a whole capture (JSON lines), in line order."""
    return list(CaptureChecker(version=version).check(lines))
