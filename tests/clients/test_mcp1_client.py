"""The published ``mcp`` 1.x Python client (the newest 1.x, in a virtualenv of its own) against
presa_trio's older era, over streamable HTTP and over stdio: the initialize handshake, tools,
sampling and elicitation pushed on the request's stream, progress, log messages after
``logging/setLevel``, a resource subscription's update on the change stream, and on HTTP the
DELETE that ends the session when the client closes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.client_installs import MCP1_VERSION
from support.published_clients import (
    ELICITATION,
    Client,
    check_exercise,
    check_session_ended,
    http_target,
    run_script,
    stdio_target,
)

pytestmark = pytest.mark.e2e

#: The 1.x client's own name in its initialize, and its ``ElicitRequestParams``, which reads a
#: form request's missing ``mode`` as "form".
CLIENT = Client(f"mcp {MCP1_VERSION}", "mcp", elicitation={"mode": "form", **ELICITATION})


def test_mcp1_client_over_http(mcp1_python: Path, clients_port: int) -> None:
    seen = run_script(mcp1_python, "mcp1_client.py", json.dumps(http_target(clients_port)))
    check_exercise(seen, CLIENT)
    check_session_ended(clients_port, seen["session_id"])


def test_mcp1_client_over_stdio(mcp1_python: Path) -> None:
    seen = run_script(mcp1_python, "mcp1_client.py", json.dumps(stdio_target()))
    check_exercise(seen, CLIENT)
    assert seen["session_id"] is None
