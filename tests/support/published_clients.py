"""Running published MCP clients against the clients app (tests/support/clients_app.py), and
what they must see: the shapes tests/clients checks.

Each client script (``mcp1_client.py``, ``mcp2_legacy_client.py``, ``ts_sdk_client.mjs``) takes
a target as JSON (``http_target`` or ``stdio_target``), drives the same exercise and prints one
JSON object on its last line; ``check_exercise`` holds every client to the same answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from support.servers import ROOT, SUPPORT

RUN_TIMEOUT = 120  # seconds for one client run (they take about one)
LEGACY = "2025-11-25"  # what every client here asks for in its initialize, and is given
PRESA_TRIO = Path(sys.executable).with_name("presa-trio")
SERVER = "clients_app:server"

TOOLS = [
    "ask_model",
    "chatty",
    "era",
    "greet",
    "relay",
    "roots",
    "sleeper",
    "steps",
    "touch",
    "whoami",
]
CAPABILITIES = {
    "logging": {},
    "resources": {"subscribe": True, "listChanged": True},
    "tools": {"listChanged": True},
}
SAMPLING = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
    "maxTokens": 50,
}
ELICITATION = {
    "message": "What is your name?",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}
PROGRESS = [{"progress": step, "total": 3, "message": f"step {step} of 3"} for step in (1, 2, 3)]
LOGS = [  # chatty logs at debug, info and error; the session asked for info and above
    {"level": "info", "data": "a info line"},
    {"level": "error", "data": "a error line"},
]


def http_target(port: int) -> dict[str, Any]:
    return {"url": f"http://127.0.0.1:{port}/mcp"}


def stdio_target() -> dict[str, Any]:
    """``presa-trio serve clients_app:server --stdio``, as a client is to spawn it."""
    return {
        "command": str(PRESA_TRIO),
        "args": ["serve", SERVER, "--stdio"],
        "env": {"PYTHONPATH": os.pathsep.join([str(ROOT), str(SUPPORT)])},
        "cwd": str(ROOT),
    }


def run(command: list[str], env: dict[str, str] | None = None) -> str:
    """Run a client to its end (``RUN_TIMEOUT`` at most: then its whole process group is
    killed); its stdout, once it exited 0."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environ.update(env or {})
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(
            f"{command[:2]} ran over {RUN_TIMEOUT} s:\n{out[-4000:]}\n{err[-4000:]}"
        ) from None
    assert process.returncode == 0, f"{command[:3]} failed:\n{out[-4000:]}\n{err[-4000:]}"
    return out


def run_script(interpreter: Path | str, script: str, *args: str) -> dict[str, Any]:
    """Run a client script of tests/support; the JSON object on its last line."""
    out = run([str(interpreter), str(SUPPORT / script), *args])
    seen: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return seen


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


@dataclass(frozen=True)
class Client:
    """What tells one client's run of the exercise from another's."""

    label: str  # what its script says it is: the package and its version
    name: str  # the clientInfo name its initialize sends
    #: the elicitation request's params as its callback is handed them
    elicitation: dict[str, Any] = field(default_factory=lambda: dict(ELICITATION))
    steps: str = "3 steps done"  # what ``steps`` answered it


def check_exercise(seen: dict[str, Any], client: Client) -> None:
    """What a client that negotiated 2025-11-25 saw of the whole exercise, exactly (bar how
    many ``touch`` calls it took the change stream to start listening)."""
    assert seen["client"] == client.label
    assert seen["protocol_version"] == LEGACY
    assert seen["server_info"] == {"name": "sessions", "version": "1"}
    assert seen["capabilities"] == CAPABILITIES
    assert seen["tools"] == TOOLS
    [whoami] = seen["whoami"]
    pid = whoami["text"]
    assert whoami == text(pid) and pid.isdigit() and int(pid) != os.getpid()
    assert seen["era"] == [text(f"{LEGACY}, a session, client {client.name}")]
    assert seen["ask_model"] == [text("model said echo of 'Say hi'")]
    assert seen["sampling"] == [SAMPLING]
    assert seen["greet"] == [text(f"Hello, Ada! state={{'asked': 'name'}} pid={pid}")]
    assert seen["elicitation"] == [client.elicitation]
    assert seen["steps"] == [text(client.steps)]
    assert seen["progress"] == PROGRESS
    assert seen["ping"] == {}
    assert seen["chatty"] == [text("said")]
    assert seen["logs"] == LOGS
    assert seen["touch"] == [text(pid)]
    assert seen["touches"] >= 1
    assert seen["update"] == {"uri": "test://watched"}
    assert seen["tools_list_changed"] is True
    assert seen["errors"] == []


def check_session_ended(port: int, session_id: object) -> None:
    """The session a client used is gone (its DELETE): a ping on it is answered 404."""
    assert isinstance(session_id, str) and session_id
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-session-id": session_id,
        "mcp-protocol-version": LEGACY,
    }
    answer = httpx.post(f"http://127.0.0.1:{port}/mcp", json=ping, headers=headers, timeout=30)
    assert answer.status_code == 404
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32001, "message": "Session not found"},
    }
