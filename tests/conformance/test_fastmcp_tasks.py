"""Tasks end to end with today's Python clients: the official MCP SDK client with the
fastmcp-tasks client extension, and FastMCP's ``call_tool_task`` handle, against a real
hypercorn trio worker on 127.0.0.1.

The official client is made by the wire reference's own expression (docs/reference/wire.md,
``tasks_client.readme_client``), and once more without its ``elicitation_callback=``, whose
parked question is then refused.
These clients send no ``Mcp-Name`` on ``tasks/*`` (the spec says a client MUST). With
``TasksExtension(require_name_header=False)`` every flow works: a task created by
``tools/call``, polled with ``tasks/get`` to its result, parked for input and answered with
``tasks/update``, cancelled with ``tasks/cancel``. The strict default refuses the very first
``tasks/get`` with -32020, so the switch is what makes these clients work. The server's wire
capture shows both. With the server tracing, the client's trace (FastMCP and the SDK put it
in ``_meta``) continues through the request, the task and the tool's run, with either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.servers import ROOT, run_client, running

pytestmark = pytest.mark.e2e

HERE = ROOT / "tests" / "support"
CLIENT = HERE / "tasks_client.py"
TOOLS = {"slow_add", "ask_name", "forever"}
# A parked task's question to a client that declared no elicitation (the wire reference's
# client without its elicitation_callback=).
MISSING = {"type": "text", "text": "Input requests need undeclared client capabilities"}


def drive(strict: bool, wire: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the clients against the tasks app; what they saw, and the server's capture."""
    env = {"PRESA_TASKS_STRICT": "1" if strict else "0", "PRESA_WIRE_LOG": str(wire)}
    with running("tasks_app:app", HERE, env=env) as served:
        seen = run_client(CLIENT, f"http://127.0.0.1:{served.port}/mcp")
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
            "ask_name_without_callback": {"ok": {"is_error": True, "content": [MISSING]}},
        },
        "handle": {
            "slow_add": {"ok": [{"type": "text", "text": "42"}]},
            "cancel": {"ok": {"before": "working", "status": "working", "after": "cancelled"}},
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
        "sdk.ask_name_without_callback": -32020,
        "handle.slow_add": -32020,
        "handle.cancel": -32020,
    }
    check_task_creation(capture)  # the tasks were created; only following them fails
    tasks = [e for e in capture if e["method"].startswith("tasks/")]
    assert [e["method"] for e in tasks] == ["tasks/get"] * 5
    for exchange in tasks:
        assert exchange["mcp_name"] is None
        assert exchange["status"] == 400
        assert exchange["answer"]["error"]["code"] == -32020


@pytest.mark.parametrize("which", ["fastmcp", "sdk"])
def test_a_clients_trace_continues_through_its_task(which: str, tmp_path: Path) -> None:
    spans_path = tmp_path / "spans.jsonl"
    env = {"PRESA_SPANS": str(spans_path)}
    with running("tasks_app:app", HERE, env=env) as served:
        seen = run_client(CLIENT, "--traced", which, f"http://127.0.0.1:{served.port}/mcp")
    assert seen["content"] == [{"type": "text", "text": "2"}]
    (agent,) = [s for s in seen["spans"] if s["name"] == "agent"]
    trace_id = "0x" + agent["trace_id"]
    client_ids = {"0x" + s["span_id"] for s in seen["spans"] if s["trace_id"] == agent["trace_id"]}
    spans = [json.loads(line) for line in spans_path.read_text().splitlines()]
    traced = [s for s in spans if s["context"]["trace_id"] == trace_id]
    by_name = {s["name"]: s for s in traced}
    request, task, tool = (
        by_name[n] for n in ("tools/call slow_add", "task slow_add", "execute_tool slow_add")
    )
    assert request["kind"] == "SpanKind.SERVER"
    assert request["parent_id"] in client_ids  # the client's span, from _meta traceparent
    assert task["parent_id"] == request["context"]["span_id"]
    assert tool["parent_id"] == task["context"]["span_id"]
    assert task["attributes"]["mcp.task.status"] == "completed"
    polls = [s for s in traced if s["name"] == "tasks/get"]
    assert polls
    assert all(s["kind"] == "SpanKind.SERVER" and s["parent_id"] in client_ids for s in polls)
    # everything the server did for this task is in the client's trace
    assert {s["name"] for s in spans} - {s["name"] for s in traced} <= {"server/discover"}
