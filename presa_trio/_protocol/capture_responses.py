"""The capture checker's responses: matched to the request they answer, typed by its method
and ``resultType`` (the core's, ``input_required`` for MRTR requests, the Tasks extension's
``task`` when declared), and what a complete result teaches later lines (the negotiated
version, declared tools and extensions; a tool result against its ``outputSchema``).

Pure: a line's response and the checker's memory (``CaptureState``) in, findings out. spec
2026-07-28 basic/patterns/mrtr.mdx and server/tools.mdx, SEP-2663.
"""

from __future__ import annotations

from typing import Any

from .capture_http import server_http
from .capture_records import CLIENT, SERVER, Record
from .capture_state import LEGACY, CaptureState
from .catalog import TASKS_EXTENSION, Catalog, schema_version
from .declared_tools import declare
from .findings import LineFindings
from .schema import Schemas
from .traffic import OTHER, InFlight

#: The requests a server may answer with ``input_required`` (spec 2026-07-28
#: basic/patterns/mrtr.mdx, Supported Requests).
MRTR_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})


def check_response(
    state: CaptureState, out: LineFindings, record: Record, message: dict[str, Any], direction: str
) -> None:
    """Check one response against the request it answers, and end that request."""
    pending = state.traffic.match(record, message, direction)
    if pending is not None:
        state.traffic.finish(pending)
        catalog = pending.catalog if state.forced is None else state.catalog(state.forced)
        method: str | None = pending.method
    else:
        catalog = state.catalog(state.version(record, message))
        method = record.header("mcp-method")
        ident = message.get("id")
        asked = state.traffic.in_exchange(record.exchange) if direction == SERVER else None
        unattributed = ident is None and "error" in message  # refused before it was read
        if asked is not None:  # the exchange's answer, under another id (or none)
            state.traffic.finish(asked)
            catalog, method = asked.catalog, asked.method
        if asked is not None and not unattributed:
            out.add(
                "JSONRPCResponse",
                "/id",
                f"id {ident!r} answers the {asked.method} request of its HTTP exchange, "
                f"whose id is {asked.request_id!r}",
                "orphan-response",
            )
        elif (
            asked is None
            and not unattributed
            and not state.traffic.was_cancelled(OTHER[direction], ident)
        ):
            out.add(
                "JSONRPCResponse",
                "/id",
                f"no request with id {ident!r} is in flight",
                "orphan-response",
            )
    if direction == CLIENT:
        state.traffic.note_exchange(record, "response", catalog)
    if record.has_http and direction == SERVER:
        server_http(state, out, record, message, catalog)
    if "error" in message:
        error = message["error"]
        code = error.get("code") if isinstance(error, dict) else None
        out.schema(catalog.schemas, catalog.error_envelope(code), message, "")
        return
    out.schema(catalog.schemas, catalog.result_envelope, message, "")
    result = message.get("result")
    if isinstance(result, dict):
        _result(state, out, record, catalog, method, pending, result)


def _result(
    state: CaptureState,
    out: LineFindings,
    record: Record,
    catalog: Catalog,
    method: str | None,
    pending: InFlight | None,
    result: dict[str, Any],
) -> None:
    tasks_in_use = pending.tasks if pending is not None else state.traffic.server_tasks
    kind = result.get("resultType")
    typed = _typed_result(state, catalog, method, tasks_in_use)
    became_task = False
    if not catalog.modern:
        if (
            method == "tools/call"
            and "task" in result
            and pending is not None
            and isinstance(pending.params.get("task"), dict)
            and catalog.schemas.has("CreateTaskResult")
        ):
            typed, became_task = (catalog.schemas, "CreateTaskResult"), True
    elif kind == "input_required":
        typed = (catalog.schemas, "InputRequiredResult")
        if method is not None and method not in MRTR_METHODS | state.tasks.requests.keys():
            out.add(
                "InputRequiredResult",
                "/result/resultType",
                f"input_required answers only {', '.join(sorted(MRTR_METHODS))}, not {method}",
                "result-type",
            )
    elif isinstance(kind, str) and kind != "complete":
        extension = state.tasks.result_types.get(kind)
        if extension is not None and tasks_in_use:
            why = state.tasks.ineligible(method, result)
            if why is not None:
                out.add(extension, "/result/resultType", why, "result-type")
            typed, became_task = (state.tasks.schemas, extension), True
        else:
            why = (
                "defined by the Tasks extension, which this request did not declare"
                if extension is not None
                else "neither complete, input_required, nor defined by a declared extension"
            )
            out.add(
                typed[1] if typed else "Result",
                "/result/resultType",
                f"resultType {kind!r} is {why}",
                "result-type",
            )
    if typed is not None:
        out.schema(typed[0], typed[1], result, "/result")
    if pending is not None and became_task:
        state.traffic.keep_token(pending)
    if kind not in (None, "complete") and catalog.modern:
        unknown = not became_task and kind != "input_required"
        if unknown and method == "tools/call" and pending is not None:
            _check_output(state, out, pending, result)  # read as the result it claims to be
        return
    _learn(state, out, record, method, pending, result)


def _typed_result(
    state: CaptureState, catalog: Catalog, method: str | None, tasks_in_use: bool
) -> tuple[Schemas, str] | None:
    if method is None:
        return None
    core = catalog.requests.get(method)
    if core is not None and core.result is not None:
        return catalog.schemas, core.result
    extension = state.tasks.requests.get(method)
    if extension is not None and extension.result is not None and catalog.modern:
        return state.tasks.schemas, extension.result
    return None


def _learn(
    state: CaptureState,
    out: LineFindings,
    record: Record,
    method: str | None,
    pending: InFlight | None,
    result: dict[str, Any],
) -> None:
    """What a complete result tells about later lines: the negotiated version, the
    declared tools and extensions; and a tool result against its ``outputSchema``."""
    if method == "initialize":
        version = schema_version(result.get("protocolVersion"))
        if version is not None:
            state.traffic.negotiate(record, pending, min(version, LEGACY))
    elif method == "server/discover":
        capabilities = result.get("capabilities")
        extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
        if isinstance(extensions, dict) and TASKS_EXTENSION in extensions:
            state.traffic.server_tasks = True
    elif method == "tools/list":
        for pointer, reason in declare(result.get("tools"), state.traffic.tools):
            out.add("Tool", "/result" + pointer, reason, "tool-schema")
    elif method == "tools/call" and pending is not None:
        _check_output(state, out, pending, result)


def _check_output(
    state: CaptureState, out: LineFindings, pending: InFlight, result: dict[str, Any]
) -> None:
    tool = state.traffic.tools.get(pending.params.get("name"))  # type: ignore[arg-type]
    if tool is None or tool.output_schema is None or result.get("isError") is True:
        return
    if "structuredContent" not in result:
        out.add(
            "outputSchema",
            "/result",
            f"tool {tool.name!r} declares an outputSchema but the result has no structuredContent",
            "output-schema",
        )
        return
    for violation in tool.output_violations(result["structuredContent"]):
        out.add(
            "outputSchema",
            "/result/structuredContent" + violation.pointer,
            violation.message,
            "output-schema",
        )
