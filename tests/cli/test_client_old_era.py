"""``presa-trio list/call/read`` against a real old-era server, the published ``mcp`` 1.x
FastMCP (tests/support/mcp1_server.py, in its own cached virtualenv), over stdio and under
uvicorn on 127.0.0.1: the 2026-07-28 probe is refused, the client opens an ``initialize``
session instead, answers the elicitation the server pushes from its stdin, and ends the HTTP
session with a DELETE."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import client_installs
from support.cli_runner import presa
from support.servers import SUPPORT, Served, free_port, wait_listening

pytestmark = pytest.mark.e2e

SERVER = str(SUPPORT / "mcp1_server.py")


@pytest.fixture(scope="module")
def mcp1_python() -> Path:
    return client_installs.mcp1_python()


@pytest.fixture(scope="module")
def mcp1_http(
    mcp1_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """The URL of the mcp 1.x server under uvicorn, and its log."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("mcp1") / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(mcp1_python), SERVER, "http", str(port)], stdout=log, stderr=subprocess.STDOUT
        )
    served = Served(port, process, log_path)
    try:
        wait_listening(served, "the mcp 1.x server", seconds=60)
        yield f"http://127.0.0.1:{port}/mcp", log_path
    finally:
        try:
            served.stop()
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, mcp1_python: Path) -> list[str]:
    """The words that name the server: ``--stdio -- CMD`` goes last, so it is a tail."""
    if request.param == "stdio":
        return ["--stdio", "--", str(mcp1_python), SERVER, "stdio"]
    url, _ = request.getfixturevalue("mcp1_http")
    return [url]


def run(
    command: str, target: list[str], *rest: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    if target[0] == "--stdio":
        return presa(command, *rest, *target, stdin=stdin)
    return presa(command, *target, *rest, stdin=stdin)


def test_list_falls_back_to_an_initialize_session(target: list[str]) -> None:
    done = run("list", target)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "add(a: integer, b: integer)",
        "    Add two integers.",
        "fail()",
        "    Always fails.",
        "ask()",
        "    Ask the client's name.",
        "count(steps: integer)",
        "    Count, reporting each step as progress.",
    ]


def test_call_types_its_arguments_and_prints_the_result(target: list[str]) -> None:
    done = run("call", target, "add", "a=2", "b=40")
    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr
    structured = run("call", target, "add", "a=2", "b=40", "--json")
    assert structured.stdout.strip().replace(" ", "").replace("\n", "") == '{"result":42}'


def test_call_of_a_failing_tool_exits_1(target: list[str]) -> None:
    done = run("call", target, "fail")
    assert done.returncode == 1, done.stderr
    assert "it failed on purpose" in done.stdout


def test_call_answers_a_pushed_elicitation_from_stdin(target: list[str]) -> None:
    done = run("call", target, "ask", stdin='{"name": "Ada"}\n')
    assert (done.returncode, done.stdout) == (0, "Hello, Ada\n"), done.stderr
    assert "Your name?" in done.stderr
    assert "log info: asking for a name" in done.stderr.splitlines()
    declined = run("call", target, "ask", stdin='{"action": "decline"}\n')
    assert (declined.returncode, declined.stdout) == (0, "no name (decline)\n"), declined.stderr


def test_read_prints_the_resource(target: list[str]) -> None:
    done = run("read", target, "note://greeting")
    assert (done.returncode, done.stdout) == (0, "hello from mcp 1.x\n"), done.stderr


def test_an_http_session_is_ended_with_a_delete(mcp1_http: tuple[str, Path]) -> None:
    url, log = mcp1_http
    before = log.read_text().count('"DELETE /mcp HTTP/1.1" 200')
    done = presa("list", url)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 30  # uvicorn logs a request once it has answered it
    while log.read_text().count('"DELETE /mcp HTTP/1.1" 200') == before:
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.05)
    assert log.read_text().count('"DELETE /mcp HTTP/1.1" 200') == before + 1
