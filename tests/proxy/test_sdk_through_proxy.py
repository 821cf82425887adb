"""``presa-trio proxy`` between the official MCP Python SDK's client and server (``mcp`` 2.x,
the test venv's), over Streamable HTTP (the server under uvicorn on 127.0.0.1) and over
stdio: the client gets its answers, the proxy finds nothing, and the capture it wrote is
accepted by ``presa-trio validate``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_runner import presa
from support.proxy_process import proxy_stdio_command, run, running_proxy
from support.servers import SUPPORT, Served, free_port, run_client, wait_listening

pytestmark = pytest.mark.e2e

SERVER = str(SUPPORT / "proxy_sdk_server.py")
CLIENT = SUPPORT / "proxy_sdk_client.py"
SAW = {
    "protocol_version": "2026-07-28",
    "tools": ["add", "steps"],
    "add": [{"type": "text", "text": "5"}],
    "steps": [{"type": "text", "text": "three steps"}],
    "progress": [{"progress": float(n), "total": 3.0, "message": f"step {n}"} for n in (1, 2, 3)],
    "note": [
        {"uri": "note://greeting", "mime_type": "text/plain", "text": "hello through the proxy"}
    ],
}


@pytest.fixture(scope="module")
def sdk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of the SDK's server under uvicorn."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("sdk") / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, SERVER, "http", str(port)], stdout=log, stderr=subprocess.STDOUT
        )
    served = Served(port, process, log_path)
    try:
        wait_listening(served, "the SDK's server", seconds=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def by_exchange(lines: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    found: dict[int, list[dict[str, Any]]] = {}
    for line in lines:
        found.setdefault(line["exchange"], []).append(line)
    return found


def test_the_sdk_client_through_the_proxy_gets_its_answers_and_nothing_is_found(
    sdk_server: str, tmp_path: Path
) -> None:
    with running_proxy(sdk_server, tmp_path) as proxy:
        assert run_client(CLIENT, proxy.url) == SAW
        status = proxy.stop()
    stderr = proxy.stderr()
    assert status == 0, stderr  # --check: nothing was found
    assert stderr.splitlines()[-1] == "presa-trio proxy: 13 line(s) recorded, 0 finding(s)"
    lines = proxy.lines()
    methods = [line["message"].get("method") for line in lines if line["direction"] == "client"]
    assert methods == ["server/discover", "tools/list", "tools/call", "tools/call",
                       "resources/read"]  # fmt: skip
    for number, exchange in by_exchange(lines).items():
        request, *answers = exchange
        assert request["direction"] == "client" and request["http"]["method"] == "POST"
        assert request["http"]["headers"]["mcp-method"] == request["message"]["method"]
        assert {a["conn"] for a in answers} == {request["conn"]}
        assert [a["direction"] for a in answers] == ["server"] * len(answers), number
        assert answers[-1]["message"]["id"] == request["message"]["id"]
        assert {a["http"]["status"] for a in answers} == {200}
    steps = by_exchange(lines)[4]  # the call of ``steps``: its progress streamed on SSE
    assert steps[1]["http"]["headers"]["content-type"].startswith("text/event-stream")
    notes = [line["message"]["params"]["progress"] for line in steps[1:4]]
    assert notes == [1, 2, 3] and all(line["sse"] == {"event": "message"} for line in steps[1:])
    assert {line["conn"] for line in lines} <= {1, 2, 3, 4, 5}  # the client's pool's
    times = [line["t"] for line in lines]
    assert times == sorted(times) and times[0] >= 0
    validated = presa("validate", str(proxy.capture))
    assert validated.returncode == 0, validated.stdout + validated.stderr


def test_the_sdk_client_through_the_stdio_proxy_gets_its_answers_and_nothing_is_found(
    tmp_path: Path,
) -> None:
    capture = tmp_path / "capture.jsonl"
    done = run([sys.executable, str(CLIENT), "--stdio",
                *proxy_stdio_command(capture, sys.executable, SERVER, "stdio")])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == SAW
    lines = [json.loads(line) for line in capture.read_text().splitlines()]
    assert all("http" not in line and "exchange" not in line for line in lines)
    sides = [(line["direction"], line["message"].get("method")) for line in lines]
    assert sides[:2] == [("client", "server/discover"), ("server", None)]
    assert sides.count(("server", "notifications/progress")) == 3
    assert "presa-trio proxy: " not in done.stderr.replace(
        f"presa-trio proxy: {len(lines)} line(s) recorded, 0 finding(s)", ""
    )
    validated = presa("validate", str(capture))
    assert validated.returncode == 0, validated.stdout + validated.stderr
