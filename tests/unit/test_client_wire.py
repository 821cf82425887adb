"""The client's pure wire layer (presa_trio/_client/wire.py): the era an answer to
``server/discover`` shows, the headers each request carries, SSE decoding, task views."""

from __future__ import annotations

import base64

import pytest

from presa_trio._client.wire import (
    Era,
    ProtocolError,
    ServerError,
    SseDecoder,
    header_value,
    http_headers,
    modern_request,
    poll_seconds,
    result_of,
    retry_params,
    task_view,
)

INFO = {"name": "t", "version": "1"}


@pytest.mark.parametrize(
    ("status", "response", "era"),
    [
        (200, {"id": 1, "result": {"supportedVersions": ["2026-07-28"]}}, Era.MODERN),
        (200, {"id": 1, "result": {"supportedVersions": ["2027-01-01"]}}, Era.LEGACY),
        (
            400,
            {"id": 1, "error": {"code": -32022, "data": {"supported": ["2026-07-28", "x"]}}},
            Era.MODERN,
        ),
        (
            400,
            {"id": 1, "error": {"code": -32022, "data": {"supported": ["2025-11-25"]}}},
            Era.LEGACY,
        ),
        # what the mcp 1.x server answers: over stdio, and over HTTP without a session
        (
            200,
            {"id": 1, "error": {"code": -32602, "message": "Invalid request parameters"}},
            Era.LEGACY,
        ),
        (
            400,
            {"id": "server-error", "error": {"code": -32600, "message": "Missing session ID"}},
            Era.LEGACY,
        ),
        (404, None, Era.LEGACY),
    ],
)
def test_the_era_is_read_from_the_answer_to_discover(
    status: int, response: dict | None, era: Era
) -> None:
    from presa_trio._client.wire import era_from_discover

    assert era_from_discover(status, response) is era


def test_a_modern_request_carries_its_client_and_the_tasks_extension_in_meta() -> None:
    message = modern_request(7, "tools/call", {"name": "x"}, INFO, progress_token="p")
    meta = message["params"]["_meta"]
    assert meta == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}, "url": {}},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        },
        "io.modelcontextprotocol/clientInfo": INFO,
        "progressToken": "p",
    }
    assert (message["id"], message["method"], message["params"]["name"]) == (7, "tools/call", "x")


def test_modern_headers_mirror_method_name_and_header_params() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "loud": {"type": "boolean", "x-mcp-header": "Loud"},
            "absent": {"type": "string", "x-mcp-header": "Absent"},
        },
    }
    arguments = {"region": "Zürich", "count": 3, "loud": False}
    message = modern_request(1, "tools/call", {"name": "w", "arguments": arguments}, INFO)
    headers = http_headers(message, Era.MODERN, input_schema=schema)
    encoded = "=?base64?" + base64.b64encode("Zürich".encode()).decode() + "?="
    assert headers == [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "w"),
        ("mcp-param-region", encoded),
        ("mcp-param-count", "3"),
        ("mcp-param-loud", "false"),
    ]


def test_task_methods_name_their_task_and_legacy_requests_their_session() -> None:
    message = modern_request(1, "tasks/get", {"taskId": "abc"}, INFO)
    assert ("mcp-name", "abc") in http_headers(message, Era.MODERN)
    legacy = http_headers(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        Era.LEGACY,
        session_id="s1",
        legacy_version="2025-11-25",
    )
    assert legacy[2:] == [("mcp-session-id", "s1"), ("mcp-protocol-version", "2025-11-25")]


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("plain", True),
        (" padded", False),
        ("tab\there", False),
        ("=?base64?x?=", False),
        ("ü", False),
    ],
)
def test_header_values_are_literal_only_when_plain_visible_ascii(value: str, literal: bool) -> None:
    sent = header_value(value)
    assert (sent == value) is literal
    if not literal:
        inner = sent.removeprefix("=?base64?").removesuffix("?=")
        assert base64.b64decode(inner, validate=True).decode() == value


def test_sse_frames_split_anywhere_decode_to_their_messages() -> None:
    stream = (
        b"id: s_0\r\nretry: 100\r\ndata: \r\n\r\n"  # a priming event: no message
        b": keep-alive\n\n"
        b'event: message\ndata: {"jsonrpc":"2.0","method":"n"}\n\n'
        b'id: s_1\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n'
    )
    decoder = SseDecoder()
    messages = []
    for at in range(0, len(stream), 7):
        messages += decoder.feed(stream[at : at + 7])
    assert messages == [
        {"jsonrpc": "2.0", "method": "n"},
        {"jsonrpc": "2.0", "id": 1, "result": {}},
    ]
    assert decoder.last_event_id == "s_1"
    with pytest.raises(ProtocolError):
        SseDecoder().feed(b"data: [1]\n\n")


def test_errors_and_missing_results_raise() -> None:
    with pytest.raises(ServerError) as raised:
        result_of({"id": 1, "error": {"code": -32602, "message": "Unknown tool"}})
    assert raised.value.code == -32602
    with pytest.raises(ProtocolError):
        result_of({"id": 1})


def test_a_task_view_reads_the_status_payload_and_bounds_the_poll_interval() -> None:
    view = task_view(
        {
            "taskId": "t",
            "status": "input_required",
            "pollIntervalMs": 1,
            "inputRequests": {"k": {"method": "elicitation/create", "params": {}}},
        }
    )
    assert (view.terminal, list(view.input_requests)) == (False, ["k"])
    assert poll_seconds(view) == 0.05
    assert (
        poll_seconds(task_view({"taskId": "t", "status": "working", "pollIntervalMs": 10**9}))
        == 5.0
    )
    assert task_view({"taskId": "t", "status": "cancelled"}).terminal
    with pytest.raises(ProtocolError):
        task_view({"status": "working"})


def test_a_retry_echoes_the_request_state_and_drops_the_last_rounds_answers() -> None:
    params = {"name": "x", "inputResponses": {"old": {}}, "requestState": "old"}
    retry = retry_params(params, {"requestState": "new"}, {"k": {"action": "accept"}})
    assert retry == {
        "name": "x",
        "inputResponses": {"k": {"action": "accept"}},
        "requestState": "new",
    }
    assert "requestState" not in retry_params({"name": "x"}, {}, {})
