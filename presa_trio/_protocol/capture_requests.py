"""The capture checker's requests: each against its method's ``$def`` (the core's, or the Tasks
extension's when declared), its routing headers, a tool call's arguments against the declared
``inputSchema``, and its id against the ids in flight.

Pure: a line's request and the checker's memory (``CaptureState``) in, findings out; spec
2026-07-28 basic/index.mdx and transports.mdx, SEP-2663. Responses are capture_responses.py's.
"""

from __future__ import annotations

from typing import Any

from . import http_rules
from .capture_records import CLIENT, SERVER, Record
from .capture_state import CaptureState, check_core_message, params_of
from .catalog import Catalog, declares_tasks
from .era import SESSION_HEADER
from .findings import LineFindings


def check_request(
    state: CaptureState, out: LineFindings, record: Record, message: dict[str, Any], direction: str
) -> None:
    """Check one request (``direction``: who sent it) and remember it as in flight."""
    method: str = message["method"]
    params = params_of(message)
    catalog = state.catalog(state.version(record, message))
    tasks = declares_tasks(params)
    state.traffic.client_tasks = state.traffic.client_tasks or tasks
    if direction == CLIENT:
        state.traffic.note_exchange(record, "request", catalog)
    if direction == SERVER and catalog.modern:
        out.add(
            "ServerNotification",
            "/id",
            "servers must not send requests in 2026-07-28",
            "direction",
        )
        return
    _check_request_schema(state, out, catalog, message, method, direction, tasks)
    if record.has_http and direction == CLIENT:
        _request_headers(state, out, record, message, catalog)
    _check_arguments(state, out, method, params)
    _start(state, out, record, message, direction, catalog, tasks)


def _check_request_schema(
    state: CaptureState,
    out: LineFindings,
    catalog: Catalog,
    message: dict[str, Any],
    method: str,
    direction: str,
    tasks: bool,
) -> None:
    core = catalog.requests.get(method)
    if core is not None:
        check_core_message(out, catalog, core, message, direction)
        return
    extension = state.tasks.requests.get(method)
    if extension is not None and catalog.modern and (tasks or state.traffic.server_tasks):
        for violation in state.tasks.request_violations(message, catalog.schemas) or ():
            out.add(violation.definition, violation.pointer, violation.message, "schema")
        return
    if extension is not None and catalog.modern:
        reason = (
            f"{method} is a method of the Tasks extension, which neither this request's "
            "capabilities nor the server declared"
        )
    else:
        reason = f"no method {method!r} in {catalog.version} or a declared extension"
    union = "ServerRequest" if direction == SERVER else "ClientRequest"
    out.add(union, "/method", reason, "unknown-method")
    out.schema(catalog.schemas, "JSONRPCRequest", message, "")


def _request_headers(
    state: CaptureState,
    out: LineFindings,
    record: Record,
    message: dict[str, Any],
    catalog: Catalog,
) -> None:
    if catalog.modern:
        for pointer, reason in http_rules.routing_headers(record, message):
            out.add("HTTP header", pointer, reason, "header")
        return
    if message.get("method") == "initialize" or record.conn is None:
        return
    given = state.traffic.sessions.get(record.conn)
    if given is not None and record.header(SESSION_HEADER) is None:
        out.add(
            "HTTP header",
            "",
            f"the Mcp-Session-Id header is missing; the server gave session {given!r}",
            "header",
        )


def _check_arguments(
    state: CaptureState, out: LineFindings, method: str, params: dict[str, Any]
) -> None:
    if method != "tools/call" or "arguments" not in params:
        return
    tool = state.traffic.tools.get(params.get("name"))  # type: ignore[arg-type]
    if tool is None:
        return
    for violation in tool.input_violations(params["arguments"]):
        out.add(
            "inputSchema",
            "/params/arguments" + violation.pointer,
            violation.message,
            "input-schema",
        )


def _start(
    state: CaptureState,
    out: LineFindings,
    record: Record,
    message: dict[str, Any],
    direction: str,
    catalog: Catalog,
    tasks: bool,
) -> None:
    earlier = state.traffic.start(record, message, direction, catalog, tasks, params_of(message))
    if earlier is not None:
        out.add(
            "JSONRPCRequest",
            "/id",
            f"id {message['id']!r} is still in flight (a {earlier.method} request)",
            "id-reused",
        )
