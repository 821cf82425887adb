"""The capture checker's HTTP checks on what the server sent: ``Content-Type``, the status
against the message (or against an empty body), and the older era's session id.

Pure: a capture record with an ``http`` member in, findings out; the rules themselves are
http_rules.py's. spec 2026-07-28 basic/transports.mdx, 2025-11-25 session management.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import http_rules
from .capture_records import Record
from .capture_state import CaptureState
from .catalog import Catalog
from .era import SESSION_HEADER
from .findings import LineFindings


def server_http(
    state: CaptureState,
    out: LineFindings,
    record: Record,
    message: Mapping[str, Any],
    catalog: Catalog,
) -> None:
    """Check the HTTP side of a message the server sent."""
    for pointer, reason in http_rules.content_type(record):
        out.add("HTTP header", pointer, reason, "header")
    for pointer, reason in http_rules.status_of_message(record, message, catalog.modern):
        out.add("HTTP status", pointer, reason, "http-status")
    exchange = state.traffic.exchange(record)
    session = record.header(SESSION_HEADER)
    given = exchange.session if exchange is not None else None
    if given is not None and session is not None and session != given:
        out.add(
            "HTTP header",
            "",
            f"the Mcp-Session-Id header {session!r} answers a request of session {given!r}",
            "header",
        )


def empty_response(state: CaptureState, out: LineFindings, record: Record) -> None:
    """Check an HTTP exchange the server answered without a message."""
    exchange = state.traffic.exchange(record)
    answered = exchange.kind if exchange is not None else None
    if answered == "other":
        answered = None
    if answered == "request" and not http_rules.is_stream(record):
        state.traffic.end_exchange(record.exchange)
    for pointer, reason in http_rules.status_without_message(record, answered):
        out.add("HTTP status", pointer, reason, "http-status")
