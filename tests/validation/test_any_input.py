"""Whatever a capture holds, the checker answers with findings, never an exception: any JSON
value, any record, any message shape, in any order."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from presa_trio.validation import CaptureChecker

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
METHODS = [
    "initialize", "tools/call", "tools/list", "tasks/get", "server/discover",
    "notifications/progress", "notifications/cancelled", "elicitation/create", "ping",
]  # fmt: skip
messages = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0")},
    optional={
        "id": st.one_of(st.integers(0, 3), st.sampled_from(["a", "b"]), values),
        "method": st.one_of(st.sampled_from(METHODS), values),
        "params": values,
        "result": st.one_of(values, st.fixed_dictionaries({}, optional={
            "resultType": st.one_of(st.sampled_from(["complete", "task", "x"]), values),
            "protocolVersion": st.sampled_from(["2025-06-18", "2026-07-28", "1"]),
            "tools": values, "capabilities": values, "structuredContent": values})),
        "error": values,
    },
)  # fmt: skip
records = st.fixed_dictionaries(
    {"direction": st.one_of(st.sampled_from(["client", "server"]), values)},
    optional={
        "message": st.one_of(messages, values),
        "conn": values,
        "exchange": st.one_of(st.integers(0, 2), values),
        "t": values,
        "http": st.one_of(values, st.fixed_dictionaries({}, optional={
            "method": values, "status": st.one_of(st.integers(100, 599), values),
            "headers": st.one_of(values, st.dictionaries(st.sampled_from([
                "content-type", "mcp-method", "mcp-name", "mcp-session-id",
                "mcp-protocol-version"]), st.one_of(st.text(max_size=12), values)))})),
    },
)  # fmt: skip
lines = st.lists(st.one_of(messages, records, values), max_size=8)


@settings(max_examples=300, deadline=None)
@given(lines)
def test_any_capture_gets_findings_not_exceptions(capture: list[Any]) -> None:
    checker = CaptureChecker()
    for number, value in enumerate(capture, start=1):
        for finding in checker.check_line(number, json.dumps(value)):
            assert finding.line == number
            json.dumps(finding.as_dict())


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_any_text_line_gets_findings_not_exceptions(raw: str) -> None:
    list(CaptureChecker().check_line(1, raw))
