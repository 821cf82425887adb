"""Tasks end to end with today's Python clients: the official MCP SDK client with the
fastmcp-tasks client extension, and FastMCP's ``call_tool_task`` handle, against a real
hypercorn trio worker on 127.0.0.1.

These clients send no ``Mcp-Name`` on ``tasks/*`` (the spec says a client MUST). With
``TasksExtension(require_name_header=False)`` every flow works: a task created by
``tools/call``, polled with ``tasks/get`` to its result, parked for input and answered with
``tasks/update``, cancelled with ``tasks/cancel``. The strict default refuses the very first
``tasks/get`` with -32020, so the switch is what makes these clients work. The server's wire
capture shows both.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, running

pytestmark = pytest.mark.e2e

HERE = ROOT / "tests" / "e2e"
CLIENT = HERE / "tasks_client.py"
TOOLS = {"slow_add", "ask_name", "forever"}


def drive(strict: bool, wire: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the clients against the tasks app; what they saw, and the server's capture."""
    env = {"PRESA_TASKS_STRICT": "1" if strict else "0", "PRESA_WIRE_LOG": str(wire)}
    with running("tasks_app:app", HERE, env=env) as served:
        done = subprocess.run(
            [sys.executable, str(CLIENT), f"http://127.0.0.1:{served.port}/mcp"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"client failed:\n{done.stdout}\n{done.stderr}"
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    capture = [json.loads(line) for line in wire.read_text().splitlines()]
    return seen, capture


def check_task_creation(capture: list[dict[str, Any]]) -> None:
    """Every tools/call named its tool in Mcp-Name and was answered with a task."""
    calls = [e for e in capture if e["method"] == "tools/call"]
    assert calls
    for exchange in calls:
        assert exchange["mcp_name"] in TOOLS
        assert exchange["status"] == 200
        assert exchange["answer"]["result"]["resultType"] == "task"


def test_todays_clients_drive_tasks_with_the_switch(tmp_path: Path) -> None:
    seen, capture = drive(strict=False, wire=tmp_path / "wire.jsonl")
    assert seen == {
        "sdk": {
            "protocol_version": "2026-07-28",
            "slow_add": {"ok": [{"type": "text", "text": "5"}]},
            "ask_name": {"ok": [{"type": "text", "text": "Hello, Ada"}]},
        },
        "handle": {
            "slow_add": {"ok": [{"type": "text", "text": "42"}]},
            "cancel": {"ok": {"before": "working", "after": "cancelled"}},
        },
    }
    check_task_creation(capture)
    tasks = [e for e in capture if e["method"].startswith("tasks/")]
    assert {e["method"] for e in tasks} == {"tasks/get", "tasks/update", "tasks/cancel"}
    for exchange in tasks:  # none named its task: this is what the switch admits
        assert exchange["mcp_name"] is None
        assert exchange["status"] == 200
        assert "result" in exchange["answer"]
    statuses = [e["answer"]["result"].get("status") for e in tasks if e["method"] == "tasks/get"]
    assert {"working", "input_required", "completed", "cancelled"} <= set(statuses)


def test_the_strict_default_refuses_them(tmp_path: Path) -> None:
    seen, capture = drive(strict=True, wire=tmp_path / "wire.jsonl")
    assert seen["sdk"]["protocol_version"] == "2026-07-28"
    codes = {
        f"{client}.{name}": outcome["error"]["code"]
        for client in ("sdk", "handle")
        for name, outcome in seen[client].items()
        if name != "protocol_version"
    }
    assert codes == {
        "sdk.slow_add": -32020,
        "sdk.ask_name": -32020,
        "handle.slow_add": -32020,
        "handle.cancel": -32020,
    }
    check_task_creation(capture)  # the tasks were created; only following them fails
    tasks = [e for e in capture if e["method"].startswith("tasks/")]
    assert [e["method"] for e in tasks] == ["tasks/get"] * 4
    for exchange in tasks:
        assert exchange["mcp_name"] is None
        assert exchange["status"] == 400
        assert exchange["answer"]["error"]["code"] == -32020
