"""The published TypeScript SDK 1.x client (``@modelcontextprotocol/sdk``, the newest 1.x, on
Node >= 22) against presa_trio's older era, over streamable HTTP
(``StreamableHTTPClientTransport``) and stdio (``StdioClientTransport`` spawning
``presa-trio serve ... --stdio``): the exercise of the Python clients, with roots asked too, and
on HTTP the session ended by ``terminateSession()`` (DELETE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.client_installs import TS_SDK_VERSION
from support.published_clients import (
    Client,
    check_exercise,
    check_session_ended,
    http_target,
    run_script,
    stdio_target,
)

pytestmark = pytest.mark.e2e

#: Its elicitation params as sent (a form request, no ``mode``); ``steps`` called with
#: ``confirm``, which asks for the roots before answering (see ts_sdk_client.mjs).
CLIENT = Client(
    f"@modelcontextprotocol/sdk {TS_SDK_VERSION}",
    "presa-trio-e2e-ts",
    steps="3 steps done, 1 roots",
)


def check(seen: dict[str, Any]) -> None:
    check_exercise(seen, CLIENT)
    assert seen["roots_asked"] == 1


def test_ts_sdk_client_over_http(node: Path, ts_sdk: Path, clients_port: int) -> None:
    seen = run_script(node, "ts_sdk_client.mjs", str(ts_sdk), json.dumps(http_target(clients_port)))
    check(seen)
    check_session_ended(clients_port, seen["session_id"])


def test_ts_sdk_client_over_stdio(node: Path, ts_sdk: Path) -> None:
    seen = run_script(node, "ts_sdk_client.mjs", str(ts_sdk), json.dumps(stdio_target()))
    check(seen)
    assert seen["session_id"] is None
