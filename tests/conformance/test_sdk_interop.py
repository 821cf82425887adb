"""Interop: the official MCP Python SDK client discovers, lists and calls the fixture's tools."""

from __future__ import annotations

from typing import Any

import pytest
from support.servers import ROOT, run_client

pytestmark = pytest.mark.e2e

CLIENT = ROOT / "tests" / "support" / "sdk_client.py"


def run_sdk(target: str) -> dict[str, Any]:
    return run_client(CLIENT, target)


def check(seen: dict[str, Any]) -> None:
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["server_name"] == "presa-trio-conformance-fixture"
    assert seen["has_tools_capability"] is True
    assert seen["tool_names"][0] == "a_header_probe"
    assert seen["tool_names"] == sorted(seen["tool_names"])
    assert "test_simple_text" in seen["tool_names"]
    assert seen["simple_text"] == [
        {"type": "text", "text": "This is a simple text response for testing."}
    ]
    assert seen["greet"] == [{"type": "text", "text": "Hello, SDK!"}]
    assert seen["error_is_error"] is True


def test_sdk_client_over_http(fixture_port: int) -> None:
    check(run_sdk(f"http://127.0.0.1:{fixture_port}/mcp"))


def test_sdk_client_over_stdio() -> None:
    check(run_sdk("--stdio"))
