"""Checking a capture of MCP traffic (``presa-trio validate``, ``presa_trio.validation``).

Each line is checked against the schema of its protocol version (2026-07-28, or 2025-11-25 /
2025-06-18 as negotiated), a result against the typed result of the request it answers, a
Tasks-extension message against the extension's schema (``schema/README.md``); and across
lines: tool calls against the schemas ``tools/list`` declared, progress tokens, request ids
in flight, responses to no request, and where the capture has them, HTTP statuses and
headers. Pure: lines in, findings out; it reads no file and keeps no clock (a record's
``t`` is the writer's).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, final

from . import http_rules
from .capture_records import CLIENT, SERVER, Record, read_record
from .catalog import (
    TASKS_EXTENSION,
    VERSIONS,
    Catalog,
    ExtensionCatalog,
    declares_tasks,
    schema_version,
)
from .declared_tools import declare
from .dialect import META_PROTOCOL_VERSION
from .era import SESSION_HEADER
from .findings import Finding
from .schema import SCHEMA_VERSION, Schemas
from .traffic import OTHER, InFlight, Traffic

__all__ = ["CaptureChecker", "Finding", "check_capture"]

_LEGACY = VERSIONS[1]  # the newest revision with ``initialize``
#: The requests a server may answer with ``input_required`` (spec 2026-07-28
#: basic/patterns/mrtr.mdx, Supported Requests).
MRTR_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})


class _Out:
    """The findings of one line, each once."""

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


def _kind(message: Mapping[str, Any]) -> str | None:
    if isinstance(message.get("method"), str):
        return "request" if "id" in message else "notification"
    if "result" in message or "error" in message:
        return "response"
    return None


def _params(message: Mapping[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    return params if isinstance(params, dict) else {}


@final
class CaptureChecker:
    """Walks a capture line by line, remembering what earlier lines said.

    ``version`` forces one protocol revision's schema for every line (else each line's is
    read from the traffic: the ``initialize`` exchange, a request's ``_meta``, the
    ``MCP-Protocol-Version`` header). ``schemas`` is a 2026-07-28 ``Schemas`` to reuse.
    """

    def __init__(self, schemas: Schemas | None = None, *, version: str | None = None) -> None:
        if version is not None and version not in VERSIONS:
            raise ValueError(f"no schema for version {version!r}; one of {', '.join(VERSIONS)}")
        self.forced = version
        self._catalogs: dict[str, Catalog] = {}
        if schemas is not None:
            self._catalogs[SCHEMA_VERSION] = Catalog.of(SCHEMA_VERSION, schemas)
        self.tasks = ExtensionCatalog.load_tasks()
        self.lines = 0
        self.traffic = Traffic()

    def catalog(self, version: str) -> Catalog:
        found = self._catalogs.get(version)
        if found is None:
            found = self._catalogs[version] = Catalog.of(version)
        return found

    # ------------------------------------------------------------------ entry points

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
        out = _Out(number)
        self._line(out, record)
        yield from out.found

    # ------------------------------------------------------------------ one line

    def _line(self, out: _Out, record: Record) -> None:
        message = record.message
        out.direction = record.direction
        if message is None:
            if record.direction == SERVER and record.has_http:
                self._empty_response(out, record)
            return
        if not isinstance(message, dict):
            out.add("JSONRPCMessage", "", "a message must be a JSON object", "schema")
            return
        kind = _kind(message)
        direction = record.direction or self._infer(message, kind)
        out.direction = direction
        if kind == "request":
            self._request(out, record, message, direction)
        elif kind == "notification":
            self._notification(out, record, message, direction)
        elif kind == "response":
            self._response(out, record, message, direction)
        else:
            catalog = self.catalog(self._version(record, message))
            self._schema(out, catalog.schemas, "JSONRPCMessage", message, "")
            if direction == CLIENT:
                self.traffic.note_exchange(record, "other", catalog)

    def _infer(self, message: Mapping[str, Any], kind: str | None) -> str:
        """The sender of a bare message: requests come from the client except those only a
        server sends (sampling, elicitation, roots in the older era); a response answers the
        side whose request with that id is in flight; notifications are the server's except
        those only a client sends."""
        legacy = self.catalog(_LEGACY)
        method = message.get("method")
        if kind == "request":
            known = legacy.requests.get(method) if isinstance(method, str) else None
            return SERVER if known is not None and known.senders == {SERVER} else CLIENT
        if kind == "response":
            ours = self.traffic.in_flight_from(SERVER, message.get("id"))
            theirs = self.traffic.in_flight_from(CLIENT, message.get("id"))
            return CLIENT if ours and not theirs else SERVER
        if method == "notifications/cancelled":
            return CLIENT
        known = legacy.notifications.get(method) if isinstance(method, str) else None
        return CLIENT if known is not None and known.senders == {CLIENT} else SERVER

    # ------------------------------------------------------------------ versions and scopes

    def _version(self, record: Record, message: Mapping[str, Any]) -> str:
        """The revision a message is checked with (see the class docstring)."""
        if self.forced is not None:
            return self.forced
        negotiated = self.traffic.session_version(record)
        if negotiated is not None:
            return negotiated
        header = schema_version(record.header("mcp-protocol-version"))
        if header is not None:
            return header
        params = _params(message)
        meta = params.get("_meta")
        if isinstance(meta, dict):
            found = schema_version(meta.get(META_PROTOCOL_VERSION))
            if found is not None:
                return found
        if message.get("method") == "initialize":
            found = schema_version(params.get("protocolVersion"))
            return min(found or _LEGACY, _LEGACY)
        return self.traffic.scope_version(record) or SCHEMA_VERSION

    # ------------------------------------------------------------------ requests

    def _request(self, out: _Out, record: Record, message: dict[str, Any], direction: str) -> None:
        method: str = message["method"]
        params = _params(message)
        catalog = self.catalog(self._version(record, message))
        tasks = declares_tasks(params)
        self.traffic.client_tasks = self.traffic.client_tasks or tasks
        if direction == CLIENT:
            self.traffic.note_exchange(record, "request", catalog)
        if direction == SERVER and catalog.modern:
            out.add(
                "ServerNotification",
                "/id",
                "servers must not send requests in 2026-07-28",
                "direction",
            )
            return
        self._check_request_schema(out, catalog, message, method, direction, tasks)
        if record.has_http and direction == CLIENT:
            self._request_headers(out, record, message, catalog)
        self._check_arguments(out, method, params)
        self._start(out, record, message, direction, catalog, tasks)

    def _check_request_schema(
        self,
        out: _Out,
        catalog: Catalog,
        message: dict[str, Any],
        method: str,
        direction: str,
        tasks: bool,
    ) -> None:
        core = catalog.requests.get(method)
        if core is not None:
            if direction not in core.senders:
                out.add(
                    core.definition,
                    "/method",
                    f"{method} is not sent by the {direction}",
                    "direction",
                )
            self._schema(out, catalog.schemas, core.definition, message, "")
            return
        extension = self.tasks.requests.get(method)
        if extension is not None and catalog.modern and (tasks or self.traffic.server_tasks):
            for violation in self.tasks.request_violations(message, catalog.schemas) or ():
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
        self._schema(out, catalog.schemas, "JSONRPCRequest", message, "")

    def _request_headers(
        self, out: _Out, record: Record, message: dict[str, Any], catalog: Catalog
    ) -> None:
        if catalog.modern:
            for pointer, reason in http_rules.routing_headers(record, message):
                out.add("HTTP header", pointer, reason, "header")
            return
        if message.get("method") == "initialize" or record.conn is None:
            return
        given = self.traffic.sessions.get(record.conn)
        if given is not None and record.header(SESSION_HEADER) is None:
            out.add(
                "HTTP header",
                "",
                f"the Mcp-Session-Id header is missing; the server gave session {given!r}",
                "header",
            )

    def _check_arguments(self, out: _Out, method: str, params: dict[str, Any]) -> None:
        if method != "tools/call" or "arguments" not in params:
            return
        tool = self.traffic.tools.get(params.get("name"))  # type: ignore[arg-type]
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
        self,
        out: _Out,
        record: Record,
        message: dict[str, Any],
        direction: str,
        catalog: Catalog,
        tasks: bool,
    ) -> None:
        earlier = self.traffic.start(record, message, direction, catalog, tasks, _params(message))
        if earlier is not None:
            out.add(
                "JSONRPCRequest",
                "/id",
                f"id {message['id']!r} is still in flight (a {earlier.method} request)",
                "id-reused",
            )

    # ------------------------------------------------------------------ notifications

    def _notification(
        self, out: _Out, record: Record, message: dict[str, Any], direction: str
    ) -> None:
        method: str = message["method"]
        catalog = self._notification_catalog(record, message, direction)
        if direction == CLIENT:
            self.traffic.note_exchange(record, "notification", catalog)
        core = catalog.notifications.get(method)
        extension = self.tasks.notifications.get(method)
        if core is not None:
            if direction not in core.senders:
                out.add(
                    core.definition,
                    "/method",
                    f"{method} is not sent by the {direction}",
                    "direction",
                )
            self._schema(out, catalog.schemas, core.definition, message, "")
        elif (
            extension is not None
            and catalog.modern
            and (self.traffic.server_tasks or self.traffic.client_tasks)
        ):
            for violation in self.tasks.notification_violations(message) or ():
                out.add(violation.definition, violation.pointer, violation.message, "schema")
        else:
            out.add(
                "ServerNotification" if direction == SERVER else "ClientNotification",
                "/method",
                f"no notification {method!r} in {catalog.version} or a declared extension",
                "unknown-method",
            )
            self._schema(out, catalog.schemas, "JSONRPCNotification", message, "")
        if record.has_http and direction == SERVER:
            self._server_http(out, record, message, catalog)
        params = _params(message)
        if method == "notifications/progress" and "progressToken" in params:
            if not self.traffic.token_live(params["progressToken"]):
                out.add(
                    "ProgressNotification",
                    "/params/progressToken",
                    f"no request in flight sent progress token {params['progressToken']!r}",
                    "progress-token",
                )
        elif method == "notifications/cancelled" and "requestId" in params:
            self.traffic.cancel(record, direction, params["requestId"])

    def _notification_catalog(
        self, record: Record, message: Mapping[str, Any], direction: str
    ) -> Catalog:
        exchange = self.traffic.exchange(record)
        if self.forced is None and direction == SERVER and exchange is not None:
            return exchange.catalog
        return self.catalog(self._version(record, message))

    # ------------------------------------------------------------------ responses

    def _response(self, out: _Out, record: Record, message: dict[str, Any], direction: str) -> None:
        pending = self.traffic.match(record, message, direction)
        if pending is not None:
            self.traffic.finish(pending)
            catalog = pending.catalog if self.forced is None else self.catalog(self.forced)
            method: str | None = pending.method
        else:
            catalog = self.catalog(self._version(record, message))
            method = record.header("mcp-method")
            ident = message.get("id")
            asked = self.traffic.in_exchange(record.exchange) if direction == SERVER else None
            if asked is not None:  # the exchange's answer, under another id
                self.traffic.finish(asked)
                catalog, method = asked.catalog, asked.method
                out.add(
                    "JSONRPCResponse",
                    "/id",
                    f"id {ident!r} answers the {asked.method} request of its HTTP exchange, "
                    f"whose id is {asked.request_id!r}",
                    "orphan-response",
                )
            elif not self.traffic.was_cancelled(OTHER[direction], ident) and not (
                ident is None and "error" in message
            ):
                out.add(
                    "JSONRPCResponse",
                    "/id",
                    f"no request with id {ident!r} is in flight",
                    "orphan-response",
                )
        if direction == CLIENT:
            self.traffic.note_exchange(record, "response", catalog)
        if record.has_http and direction == SERVER:
            self._server_http(out, record, message, catalog)
        if "error" in message:
            error = message["error"]
            code = error.get("code") if isinstance(error, dict) else None
            self._schema(out, catalog.schemas, catalog.error_envelope(code), message, "")
            return
        self._schema(out, catalog.schemas, catalog.result_envelope, message, "")
        result = message.get("result")
        if isinstance(result, dict):
            self._result(out, record, catalog, method, pending, result)

    def _result(
        self,
        out: _Out,
        record: Record,
        catalog: Catalog,
        method: str | None,
        pending: InFlight | None,
        result: dict[str, Any],
    ) -> None:
        tasks_in_use = pending.tasks if pending is not None else self.traffic.server_tasks
        kind = result.get("resultType")
        typed = self._typed_result(catalog, method, tasks_in_use)
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
            if method is not None and method not in MRTR_METHODS | self.tasks.requests.keys():
                out.add(
                    "InputRequiredResult",
                    "/result/resultType",
                    f"input_required answers only {', '.join(sorted(MRTR_METHODS))}, not {method}",
                    "result-type",
                )
        elif isinstance(kind, str) and kind != "complete":
            extension = self.tasks.result_types.get(kind)
            if extension is not None and tasks_in_use:
                if method not in (None, "tools/call"):
                    out.add(
                        extension,
                        "/result/resultType",
                        f"resultType {kind!r} answers only tools/call, not {method}",
                        "result-type",
                    )
                typed, became_task = (self.tasks.schemas, extension), True
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
            self._schema(out, typed[0], typed[1], result, "/result")
        if pending is not None and became_task:
            self.traffic.keep_token(pending)
        if kind not in (None, "complete") and catalog.modern:
            unknown = not became_task and kind != "input_required"
            if unknown and method == "tools/call" and pending is not None:
                self._check_output(out, pending, result)  # read as the result it claims to be
            return
        self._learn(out, record, method, pending, result)

    def _typed_result(
        self, catalog: Catalog, method: str | None, tasks_in_use: bool
    ) -> tuple[Schemas, str] | None:
        if method is None:
            return None
        core = catalog.requests.get(method)
        if core is not None and core.result is not None:
            return catalog.schemas, core.result
        extension = self.tasks.requests.get(method)
        if extension is not None and extension.result is not None and catalog.modern:
            return self.tasks.schemas, extension.result
        return None

    def _learn(
        self,
        out: _Out,
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
                self.traffic.negotiate(record, pending, min(version, _LEGACY))
        elif method == "server/discover":
            capabilities = result.get("capabilities")
            extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
            if isinstance(extensions, dict) and TASKS_EXTENSION in extensions:
                self.traffic.server_tasks = True
        elif method == "tools/list":
            for pointer, reason in declare(result.get("tools"), self.traffic.tools):
                out.add("Tool", "/result" + pointer, reason, "tool-schema")
        elif method == "tools/call" and pending is not None:
            self._check_output(out, pending, result)

    def _check_output(self, out: _Out, pending: InFlight, result: dict[str, Any]) -> None:
        tool = self.traffic.tools.get(pending.params.get("name"))  # type: ignore[arg-type]
        if tool is None or tool.output_schema is None or result.get("isError") is True:
            return
        if "structuredContent" not in result:
            out.add(
                "outputSchema",
                "/result",
                f"tool {tool.name!r} declares an outputSchema but the result has no "
                "structuredContent",
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

    # ------------------------------------------------------------------ HTTP

    def _server_http(
        self, out: _Out, record: Record, message: Mapping[str, Any], catalog: Catalog
    ) -> None:
        for pointer, reason in http_rules.content_type(record):
            out.add("HTTP header", pointer, reason, "header")
        for pointer, reason in http_rules.status_of_message(record, message, catalog.modern):
            out.add("HTTP status", pointer, reason, "http-status")
        exchange = self.traffic.exchange(record)
        session = record.header(SESSION_HEADER)
        given = exchange.session if exchange is not None else None
        if given is not None and session is not None and session != given:
            out.add(
                "HTTP header",
                "",
                f"the Mcp-Session-Id header {session!r} answers a request of session {given!r}",
                "header",
            )

    def _empty_response(self, out: _Out, record: Record) -> None:
        exchange = self.traffic.exchange(record)
        answered = exchange.kind if exchange is not None else None
        if answered == "other":
            answered = None
        if answered == "request" and not http_rules.is_stream(record):
            self.traffic.end_exchange(record.exchange)
        for pointer, reason in http_rules.status_without_message(record, answered):
            out.add("HTTP status", pointer, reason, "http-status")

    # ------------------------------------------------------------------ schema

    def _schema(
        self, out: _Out, schemas: Schemas, definition: str, instance: object, prefix: str
    ) -> None:
        for violation in schemas.violations(definition, instance):
            out.add(definition, prefix + violation.pointer, violation.message, "schema")


def check_capture(lines: Iterable[str], *, version: str | None = None) -> list[Finding]:
    """Every finding of a whole capture (JSON lines), in line order."""
    return list(CaptureChecker(version=version).check(lines))
