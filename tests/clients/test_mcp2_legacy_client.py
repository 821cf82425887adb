"""The test venv's ``mcp`` 2.x Python client in its legacy mode (``Client(mode="legacy")``: the
initialize handshake of 2025-11-25) against presa_trio, over streamable HTTP and over stdio,
through the same exercise as the 1.x client; and, without that option (``mode="auto"``, which
probes ``server/discover`` first), the same client lands on 2026-07-28 with no session."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any

import pytest
from support.published_clients import (
    ELICITATION,
    LEGACY,
    TOOLS,
    Client,
    check_exercise,
    check_session_ended,
    http_target,
    run_script,
    stdio_target,
    text,
)

pytestmark = pytest.mark.e2e

SCRIPT = "mcp2_legacy_client.py"
MCP2 = version("mcp")
#: Like 1.x, its ``ElicitRequestParams`` reads a form request's missing ``mode`` as "form".
CLIENT = Client(f"mcp {MCP2} mode=legacy", "mcp", elicitation={"mode": "form", **ELICITATION})


def test_the_venv_holds_mcp_2() -> None:
    assert MCP2.split(".")[0] == "2"


def test_mcp2_legacy_mode_over_http(clients_port: int) -> None:
    seen = run_script(sys.executable, SCRIPT, "legacy", json.dumps(http_target(clients_port)))
    check_exercise(seen, CLIENT)
    assert seen["initialize_version"] == LEGACY
    [session_id] = seen["session_ids"]  # one session, named on every answer
    check_session_ended(clients_port, session_id)


def test_mcp2_legacy_mode_over_stdio() -> None:
    seen = run_script(sys.executable, SCRIPT, "legacy", json.dumps(stdio_target()))
    check_exercise(seen, CLIENT)
    assert seen["initialize_version"] == LEGACY


def check_modern(seen: dict[str, Any]) -> None:
    assert seen["client"] == f"mcp {MCP2} mode=auto"
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["handshake"] is False
    assert seen["tools"] == TOOLS
    [whoami] = seen["whoami"]
    assert whoami == text(whoami["text"]) and whoami["text"].isdigit()
    assert seen["era"] == [text("2026-07-28, no session, client mcp")]


def test_mcp2_default_mode_lands_on_2026_07_28_over_http(clients_port: int) -> None:
    seen = run_script(sys.executable, SCRIPT, "auto", json.dumps(http_target(clients_port)))
    check_modern(seen)
    assert seen["session_ids"] == []  # no session was opened


def test_mcp2_default_mode_lands_on_2026_07_28_over_stdio() -> None:
    check_modern(run_script(sys.executable, SCRIPT, "auto", json.dumps(stdio_target())))
