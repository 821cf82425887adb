"""``presa-trio proxy`` between the published ``mcp`` 1.30.0 client and server (the cached
virtualenv of tests/support/client_installs.py; the server under uvicorn on 127.0.0.1): an
``initialize`` session, its ``mcp-session-id`` both ways, the server's elicitation on the
call's SSE stream, the client's answer, and the closing DELETE all pass and are captured."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import client_installs
from support.cli_runner import presa
from support.proxy_process import running_proxy
from support.servers import SUPPORT, Served, free_port, wait_listening

pytestmark = pytest.mark.e2e

SERVER = str(SUPPORT / "mcp1_server.py")
CLIENT = str(SUPPORT / "proxy_mcp1_client.py")


@dataclass
class Session:
    seen: dict[str, Any]  # what the client printed
    lines: list[dict[str, Any]]  # the capture
    stderr: str  # the proxy's
    status: int  # the proxy's exit status (--check)
    capture: Path


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """One session of the mcp 1.x client with the mcp 1.x server, through the proxy."""
    python = client_installs.mcp1_python()
    scratch = tmp_path_factory.mktemp("old-era")
    port = free_port()
    with open(scratch / "server.log", "wb") as log:
        process = subprocess.Popen(
            [str(python), SERVER, "http", str(port)], stdout=log, stderr=subprocess.STDOUT
        )
    served = Served(port, process, scratch / "server.log")
    try:
        wait_listening(served, "the mcp 1.x server", seconds=60)
        with running_proxy(f"http://127.0.0.1:{port}/mcp", scratch) as proxy:
            done = subprocess.run(
                [str(python), CLIENT, proxy.url], capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stderr
            status = proxy.stop()
        seen = json.loads(done.stdout.splitlines()[-1])
        yield Session(seen, proxy.lines(), proxy.stderr(), status, proxy.capture)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_old_era_session_works_through_the_proxy(session: Session) -> None:
    assert session.seen == {
        "protocol_version": "2025-11-25",
        "tools": ["add", "ask", "count", "fail"],
        "add": [{"type": "text", "text": "5"}],
        "ask": [{"type": "text", "text": "Hello, Ada"}],
        "note": [
            {"uri": "note://greeting", "mimeType": "text/plain", "text": "hello from mcp 1.x"}
        ],
        "session_id": session.seen["session_id"],
    }
    assert session.seen["session_id"]


def test_the_capture_holds_the_session_its_streams_and_its_end(session: Session) -> None:
    lines, session_id = session.lines, session.seen["session_id"]
    first, answer = lines[0], lines[1]
    assert first["message"]["method"] == "initialize" and "mcp-session-id" not in first["http"]
    assert answer["http"]["headers"]["mcp-session-id"] == session_id
    later = [line for line in lines[2:] if line["direction"] == "client"]
    assert all(line["http"]["headers"]["mcp-session-id"] == session_id for line in later)
    methods = [line["http"]["method"] for line in later]
    assert "GET" in methods and methods[-1] == "DELETE"  # the standalone stream; the end
    # The elicitation: asked on the SSE stream of the call of ``ask``, answered by a POST
    # whose 202 carries no message.
    (asked,) = [line for line in lines if line.get("message", {}).get("method") ==
                "elicitation/create"]  # fmt: skip
    assert asked["direction"] == "server" and asked["sse"]["event"] == "message"
    call = next(line for line in lines if line["exchange"] == asked["exchange"])
    assert call["message"]["params"]["name"] == "ask"
    (reply,) = [line for line in later if line.get("message", {}).get("id") ==
                asked["message"]["id"] and "result" in line["message"]]  # fmt: skip
    (accepted,) = [line for line in lines if line["direction"] == "server" and
                   line["exchange"] == reply["exchange"]]  # fmt: skip
    assert accepted["http"]["status"] == 202 and "message" not in accepted


def test_the_old_era_session_yields_no_finding(session: Session) -> None:
    assert session.status == 0, session.stderr
    validated = presa("validate", str(session.capture))
    assert validated.returncode == 0, validated.stdout
