"""Injected faults in captures: each one reported by ``presa_trio.validation`` with its rule
and the JSON pointer of the leaf at fault; and well-formed traffic of each era, with none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from presa_trio.validation import RULES, CaptureChecker, Finding, check_capture

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
TASKS_META = {**META, "io.modelcontextprotocol/clientCapabilities": TASKS}
WHEN = "2026-11-03T18:04:05.123Z"


def request(
    ident: object, method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] = META
) -> dict[str, Any]:
    body = {**(params or {}), "_meta": meta}
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": body}


def result(ident: object, body: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "result": body}


def found(*messages: object, version: str | None = None) -> list[tuple[int, str, str]]:
    lines = [m if isinstance(m, str) else json.dumps(m) for m in messages]
    return [(f.line, f.rule, f.pointer) for f in check_capture(lines, version=version)]


def task(**changes: Any) -> dict[str, Any]:
    body = {"taskId": "t-1", "status": "working", "createdAt": WHEN, "lastUpdatedAt": WHEN,
            "ttlMs": 60000, "pollIntervalMs": 100}  # fmt: skip
    return {**body, **changes}


TOOLS = {
    "resultType": "complete",
    "ttlMs": 0,
    "cacheScope": "private",
    "tools": [
        {
            "name": "count",
            "inputSchema": {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {"count": {"type": "integer"}},
                "required": ["count"],
            },
        }
    ],
}


def test_a_typo_in_result_type_with_a_broken_body_is_reported_at_each_leaf() -> None:
    broken = {"resultType": "completed", "ttlMs": "soon", "cacheScope": "private"}
    assert found(request(1, "resources/read", {"uri": "x://a"}), result(1, broken)) == [
        (2, "result-type", "/result/resultType"),
        (2, "schema", "/result"),  # "contents" is a required property
        (2, "schema", "/result/ttlMs"),
    ]


def test_an_unknown_result_type_is_still_checked_as_the_methods_result() -> None:
    broken = {"resultType": "done", "content": "not a list"}
    findings = check_capture(
        [json.dumps(request(1, "tools/call", {"name": "t"})), json.dumps(result(1, broken))]
    )
    assert [(f.rule, f.pointer, f.definition) for f in findings] == [
        ("result-type", "/result/resultType", "CallToolResult"),
        ("schema", "/result/content", "CallToolResult"),
    ]
    assert findings[1].message == '"not a list" is not of type "array"'
    assert {f.direction for f in findings} == {"server"}


def test_a_bogus_task_is_reported_at_its_leaves() -> None:
    bogus = {"resultType": "task", **task(taskId=17, status="bogus")}
    findings = check_capture(
        [
            json.dumps(request(1, "tools/call", {"name": "slow"}, TASKS_META)),
            json.dumps(result(1, bogus)),
        ]
    )
    assert [(f.rule, f.pointer, f.definition) for f in findings] == [
        ("schema", "/result/taskId", "CreateTaskResult"),
        ("schema", "/result/status", "CreateTaskResult"),
    ]
    assert findings[1].message.startswith('"bogus" is not one of "working", "input_required"')


def test_a_task_result_without_the_extension_declared_is_a_finding() -> None:
    created = {"resultType": "task", **task()}
    assert found(request(1, "tools/call", {"name": "slow"}), result(1, created)) == [
        (2, "result-type", "/result/resultType"),
        (2, "schema", "/result"),  # and, as a CallToolResult, it has no content
    ]


def test_valid_tasks_traffic_passes_when_the_extension_is_declared() -> None:
    discover = {
        "resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 0,
        "cacheScope": "private", "serverInfo": {"name": "s", "version": "1"},
        "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
    }  # fmt: skip
    done = {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}
    capture = [
        request(0, "server/discover"),
        result(0, discover),
        request(1, "tools/call", {"name": "slow"}, TASKS_META),
        result(1, {"resultType": "task", **task()}),
        request(2, "tasks/get", {"taskId": "t-1"}, TASKS_META),
        result(2, {"resultType": "complete", **task(status="completed", result=done)}),
        request(3, "tasks/cancel", {"taskId": "t-1"}, TASKS_META),
        result(3, {"resultType": "complete"}),
        request(4, "tasks/update", {"taskId": "t-1", "inputResponses": {}}, TASKS_META),
        result(4, {"resultType": "complete"}),
        {"jsonrpc": "2.0", "method": "notifications/tasks", "params": task(status="cancelled")},
    ]
    assert found(*capture) == []


@pytest.mark.parametrize(
    ("params", "pointer"),
    [({}, "/params"), ({"taskId": 7}, "/params/taskId")],
)
def test_a_tasks_get_without_a_task_id_is_reported(params: dict[str, Any], pointer: str) -> None:
    assert found(request(2, "tasks/get", params, TASKS_META)) == [(1, "schema", pointer)]


def test_a_tasks_get_without_meta_is_reported_once_the_server_declared_tasks() -> None:
    discover = {"resultType": "complete", "capabilities": {"extensions": TASKS["extensions"]}}
    bare = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {}}
    findings = found(request(0, "server/discover"), result(0, discover), bare)
    assert (3, "schema", "/params") in findings  # "taskId", and "_meta", are required
    messages = {f.message for f in check_capture([json.dumps(m) for m in (
        request(0, "server/discover"), result(0, discover), bare)]) if f.line == 3}  # fmt: skip
    assert {'"taskId" is a required property', '"_meta" is a required property'} <= messages


def test_a_tasks_method_without_the_extension_anywhere_is_unknown() -> None:
    assert found(request(2, "tasks/get", {"taskId": "x"})) == [(1, "unknown-method", "/method")]


def test_a_misspelt_method_is_unknown() -> None:
    assert found(request(3, "tools/cal", {"name": "t"})) == [(1, "unknown-method", "/method")]
    note = {"jsonrpc": "2.0", "method": "notifications/progres", "params": {}}
    assert found(note) == [(1, "unknown-method", "/method")]


def test_a_wrong_type_under_any_of_is_reported_at_the_leaf() -> None:
    bad = {"resultType": "complete", "content": [{"type": "text", "text": 3}]}
    findings = check_capture([json.dumps(request(1, "tools/call", {"name": "t"})),
                              json.dumps(result(1, bad))])  # fmt: skip
    assert [(f.pointer, f.message) for f in findings] == [
        ("/result/content/0/text", '3 is not of type "string"')
    ]


def test_structured_content_and_arguments_against_the_declared_schemas() -> None:
    capture = [
        request(1, "tools/list"),
        result(1, TOOLS),
        request(2, "tools/call", {"name": "count", "arguments": {"n": "three"}}),
        result(2, {"resultType": "complete", "content": [], "structuredContent": {"count": "x"}}),
        request(3, "tools/call", {"name": "count", "arguments": {"n": 3}}),
        result(3, {"resultType": "complete", "content": [], "structuredContent": {"count": 3}}),
        request(4, "tools/call", {"name": "count", "arguments": {"n": 3}}),
        result(4, {"resultType": "complete", "content": []}),
    ]
    assert found(*capture) == [
        (3, "input-schema", "/params/arguments/n"),
        (4, "output-schema", "/result/structuredContent/count"),
        (8, "output-schema", "/result"),  # an outputSchema, and no structuredContent
    ]


def test_an_unknown_result_type_is_still_held_to_the_declared_output_schema() -> None:
    claims = {"resultType": "done", "content": [], "structuredContent": {"count": "x"}}
    capture = [request(1, "tools/list"), result(1, TOOLS),
               request(2, "tools/call", {"name": "count", "arguments": {"n": 3}}),
               result(2, claims)]  # fmt: skip
    assert found(*capture) == [
        (4, "result-type", "/result/resultType"),
        (4, "output-schema", "/result/structuredContent/count"),
    ]


def test_input_required_answers_only_the_mrtr_methods() -> None:
    asking = {"resultType": "input_required", "requestState": "s"}
    assert found(request(1, "tools/call", {"name": "t"}), result(1, asking)) == []
    assert found(request(1, "tools/list"), result(1, asking)) == [
        (2, "result-type", "/result/resultType")
    ]


def test_a_stray_progress_token_is_reported() -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "p-1", "progress": 1}}  # fmt: skip
    stray = {**progress, "params": {"progressToken": "stray", "progress": 1}}
    traced = request(1, "tools/call", {"name": "t"}, {**META, "progressToken": "p-1"})
    done = result(1, {"resultType": "complete", "content": []})
    assert found(traced, progress, stray, done, progress) == [
        (3, "progress-token", "/params/progressToken"),
        (5, "progress-token", "/params/progressToken"),  # its request has been answered
    ]


def test_an_id_reused_in_flight_is_reported_and_reuse_after_the_answer_is_not() -> None:
    done = result(1, {"resultType": "complete", "content": []})
    call = request(1, "tools/call", {"name": "t"})
    assert found(call, call) == [(2, "id-reused", "/id")]
    assert found(call, done, call) == []


def test_ids_are_scoped_by_connection_and_session() -> None:
    def on(conn: int, message: dict[str, Any]) -> dict[str, Any]:
        return {"direction": "client", "conn": conn, "message": message}

    call = request(1, "tools/call", {"name": "t"})
    assert found(on(1, call), on(2, call)) == []
    assert found(on(1, call), on(1, call)) == [(2, "id-reused", "/id")]


def test_a_response_to_no_request_is_reported() -> None:
    assert found(result(9, {"resultType": "complete"})) == [(1, "orphan-response", "/id")]
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    late = result(1, {"resultType": "complete", "content": []})
    assert found(request(1, "tools/call", {"name": "t"}), cancel, late) == []


def record(direction: str, message: dict[str, Any] | None, exchange: int,
           http: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    line: dict[str, Any] = {"direction": direction, "exchange": exchange, "http": http}
    if message is not None:
        line["message"] = message
    return line


def headers(method: str, **more: str) -> dict[str, Any]:
    return {"method": "POST", "headers": {"mcp-protocol-version": "2026-07-28",
                                          "mcp-method": method, **more}}  # fmt: skip


JSON = {"content-type": "application/json"}


def test_a_wrong_http_status_and_a_mismatched_method_header() -> None:
    call = request(1, "tools/call", {"name": "t"})
    missing = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}
    capture = [
        record("client", call, 1, headers("tools/list", **{"mcp-name": "t"})),
        record("server", missing, 1, {"status": 200, "headers": JSON}),
    ]
    findings = check_capture([json.dumps(line) for line in capture])
    assert [(f.line, f.rule, f.pointer, f.definition) for f in findings] == [
        (1, "header", "/method", "HTTP header"),
        (2, "http-status", "/error/code", "HTTP status"),
    ]


def test_routing_headers_are_required_and_compared() -> None:
    call = request(1, "tools/call", {"name": "t"})
    bare = record("client", call, 1, {"method": "POST", "headers": {}})
    assert found(bare) == [
        (1, "header", "/params/_meta/io.modelcontextprotocol~1protocolVersion"),
        (1, "header", "/method"),
        (1, "header", "/params/name"),
    ]
    encoded = "=?base64?dA==?="  # "t"
    assert found(record("client", call, 1, headers("tools/call", **{"mcp-name": encoded}))) == []
    other = headers("tools/call", **{"mcp-name": "u"})
    assert found(record("client", call, 1, other)) == [(1, "header", "/params/name")]


def test_statuses_of_bodiless_responses_and_content_types() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    call = request(1, "tools/list")
    ok = result(1, {"resultType": "complete", "tools": [], "ttlMs": 0, "cacheScope": "private"})
    capture = [
        record("client", note, 1, {"method": "POST", "headers": {}}),
        record("server", None, 1, {"status": 200, "headers": {}}),  # must be 202
        record("client", call, 2, headers("tools/list")),
        record("server", None, 2, {"status": 202, "headers": {}}),  # a request unanswered
        record("client", call | {"id": 2}, 3, headers("tools/list")),
        record("server", ok | {"id": 2}, 3, {"status": 500, "headers": {"content-type": "text/x"}}),
    ]
    assert found(*capture) == [
        (2, "http-status", ""),
        (4, "http-status", ""),
        (6, "header", ""),
        (6, "http-status", ""),
    ]


def test_a_result_is_typed_by_the_mcp_method_header_on_its_line() -> None:
    """A result whose request is not in the capture: the method its line names types it."""
    broken = result(7, {"resultType": "complete", "content": "not a list"})
    line = {"direction": "server", "message": broken,
            "http": {"status": 200, "headers": {**JSON, "mcp-method": "tools/call"}}}  # fmt: skip
    findings = check_capture([json.dumps(line)])
    assert [(f.rule, f.pointer, f.definition) for f in findings] == [
        ("orphan-response", "/id", "JSONRPCResponse"),
        ("schema", "/result/content", "CallToolResult"),
    ]


def test_an_exchange_answered_under_another_id_is_a_finding_that_ends_the_request() -> None:
    call = request(1, "tools/list")
    wrong = {"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600, "message": "x"}}
    capture = [
        record("client", call, 1, headers("tools/list")),
        record("server", wrong, 1, {"status": 400, "headers": JSON}),
        record("client", call, 2, headers("tools/list")),  # id 1 again: no longer in flight
    ]
    findings = check_capture([json.dumps(line) for line in capture])
    assert [(f.line, f.rule, f.pointer) for f in findings] == [(2, "orphan-response", "/id")]
    assert findings[0].message.endswith("tools/list request of its HTTP exchange, whose id is 1")


def test_a_refusal_at_the_http_level_keeps_its_status_and_may_have_no_id() -> None:
    """An Origin refused with 403 and an error without an id (which the request's id could
    not be read for), a body over the limit with 413, a retryable internal error with 503:
    what the wire allows, so nothing is found; the same refusals with 200 are findings."""
    call = request(1, "tools/list")
    forbidden = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Forbidden: Origin"}}
    busy = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "retry"}}
    capture = [
        record("client", call, 1, headers("tools/list")),
        record("server", forbidden, 1, {"status": 403, "headers": JSON}),
        record("client", call, 2, headers("tools/list")),  # id 1 no longer in flight
        record("server", forbidden, 2, {"status": 413, "headers": JSON}),
        record("client", call | {"id": 3}, 3, headers("tools/list")),
        record("server", busy, 3, {"status": 503, "headers": JSON}),
    ]
    assert found(*capture) == []
    capture[1] = record("server", forbidden, 1, {"status": 200, "headers": JSON})
    capture[5] = record("server", busy, 3, {"status": 502, "headers": JSON})
    assert found(*capture) == [(2, "http-status", "/error/code"), (6, "http-status", "/error/code")]


def test_a_request_refused_without_a_body_is_no_longer_in_flight() -> None:
    call = request(1, "tools/list")
    refused = record("server", None, 1, {"status": 503, "headers": {}})
    again = record("client", call, 2, headers("tools/list"))
    assert found(record("client", call, 1, headers("tools/list")), refused, again) == []


def test_old_era_traffic_checks_cleanly_with_its_own_schema() -> None:
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "c", "version": "1"}}}  # fmt: skip
    accepted = result(0, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                          "serverInfo": {"name": "s", "version": "1"}})  # fmt: skip
    elicit = {"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {
        "message": "Name?", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string"}}}}}  # fmt: skip
    capture = [
        initialize,
        accepted,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask"}},
        elicit,  # from the server: legal in this era, its side inferred
        result(7, {"action": "accept", "content": {"name": "Ada"}}),  # the client's answer
        result(1, {"content": [{"type": "text", "text": "Hello, Ada"}]}),
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        result(2, {}),
    ]
    assert found(*capture) == []
    # the same traffic read as 2026-07-28 is wrong from the first line
    assert (1, "unknown-method", "/method") in found(*capture, version="2026-07-28")


def test_old_era_tasks_of_2025_11_25_check_cleanly() -> None:
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"}}}  # fmt: skip
    accepted = result(0, {"protocolVersion": "2025-11-25", "capabilities": {"tasks": {}},
                          "serverInfo": {"name": "s", "version": "1"}})  # fmt: skip
    old_task = {"taskId": "t", "status": "working", "createdAt": WHEN,
                "lastUpdatedAt": WHEN, "ttl": 60000}  # fmt: skip
    capture = [
        initialize,
        accepted,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "slow", "task": {"ttl": 60000}}},
        result(1, {"task": old_task}),
        {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": old_task},
        {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "t"}},
        result(2, old_task),
    ]  # fmt: skip
    assert found(*capture) == []
    assert found(*capture, version="2025-06-18")[0] == (4, "schema", "/result")


def test_a_server_request_is_a_finding_only_in_2026() -> None:
    sample = {"jsonrpc": "2.0", "id": 5, "method": "sampling/createMessage",
              "params": {"messages": [], "maxTokens": 5}}  # fmt: skip
    tagged = {"direction": "server", "message": sample}
    assert found(tagged) == [(1, "direction", "/id")]
    assert found(tagged, version="2025-11-25") == []


def test_malformed_lines_and_records_get_a_clear_finding() -> None:
    assert found("{not json", "[1]", {"direction": "sideways", "message": {}},
                 {"direction": "server", "message": {}, "extra": 1},
                 {"direction": "client", "http": "POST"}) == [
        (1, "json", ""),
        (2, "schema", ""),
        (3, "capture", ""),
        (4, "capture", ""),
        (5, "capture", ""),
    ]  # fmt: skip


def test_sse_and_body_members_are_kept_for_the_reader_and_checked_for_shape() -> None:
    """What the proxy writes beside a message: the SSE event's id and name, the start of a
    body that was not JSON."""
    call = request(1, "tools/call", {"name": "t"})
    answer = result(1, {"resultType": "complete", "content": []})
    event = {"direction": "server", "message": answer, "sse": {"id": "s_1", "event": "message"}}
    text = {"direction": "server", "http": {"status": 502}, "body": "Bad Gateway"}
    assert found(call, event) == []
    checker = CaptureChecker()
    assert list(checker.check_line(1, json.dumps(text))) == []
    assert found(
        {"direction": "server", "message": answer, "sse": {"id": 7}},
        {"direction": "server", "message": answer, "sse": {"retry": "1000"}},
        {"direction": "server", "http": {"status": 502}, "body": {"text": "no"}},
    ) == [(1, "capture", ""), (2, "capture", ""), (3, "capture", "")]


def test_findings_serialise_and_name_known_rules() -> None:
    checker = CaptureChecker()
    [finding] = checker.check_line(1, json.dumps(request(3, "tools/cal")))
    assert isinstance(finding, Finding)
    assert finding.as_dict() == {
        "line": 1,
        "rule": "unknown-method",
        "direction": "client",
        "definition": "ClientRequest",
        "pointer": "/method",
        "message": "no method 'tools/cal' in 2026-07-28 or a declared extension",
    }
    assert finding.rule in RULES
    [same] = CaptureChecker().check_record(1, request(3, "tools/cal"))
    assert same == finding
    with pytest.raises(ValueError, match="no schema for version"):
        CaptureChecker(version="1999-01-01")


def test_an_older_era_session_is_kept_over_http() -> None:
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"}}}  # fmt: skip
    accepted = result(0, {"protocolVersion": "2025-11-25", "capabilities": {},
                          "serverInfo": {"name": "s", "version": "1"}})  # fmt: skip
    listed = result(1, {"tools": []})
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    session = {"mcp-session-id": "s-1", "mcp-protocol-version": "2025-11-25"}

    def line(direction: str, message: dict[str, Any], exchange: int, **http: Any) -> dict[str, Any]:
        return {"direction": direction, "conn": 1, "exchange": exchange, "message": message,
                "http": http}  # fmt: skip

    answer = {"status": 200, "headers": {**JSON, "mcp-session-id": "s-1"}}
    good = [
        line("client", initialize, 1, method="POST", headers={}),
        line("server", accepted, 1, **answer),
        line("client", listing, 2, method="POST", headers=session),
        line("server", listed, 2, **answer),
    ]
    assert found(*good) == []
    forgotten = [*good[:2], line("client", listing, 2, method="POST", headers={}), good[3]]
    assert found(*forgotten) == [(3, "header", "")]
    other = {"status": 200, "headers": {**JSON, "mcp-session-id": "s-2"}}
    assert found(*good[:3], line("server", listed, 2, **other)) == [(4, "header", "")]


def test_a_declared_schema_that_cannot_be_compiled_is_a_finding_and_fetches_nothing() -> None:
    remote = {"name": "far", "inputSchema": {"type": "object"},
              "outputSchema": {"$ref": "http://127.0.0.1:9/schema.json"}}  # fmt: skip
    bad_regex = {"name": "re", "inputSchema": {"type": "object", "pattern": "("}}
    tools = {**TOOLS, "tools": [remote, bad_regex]}
    findings = check_capture([json.dumps(request(1, "tools/list")), json.dumps(result(1, tools))])
    assert [(f.rule, f.pointer) for f in findings] == [
        ("tool-schema", "/result/tools/0/outputSchema"),
        ("tool-schema", "/result/tools/1/inputSchema"),
    ]
    assert all("\n" not in f.message and f.message.startswith("cannot be compiled: ")
               for f in findings)  # fmt: skip
