"""``presa-trio proxy --stdio -- CMD``: lines pass unchanged both ways while each is checked,
the child's stderr is the proxy's, its exit status is the proxy's; a command line that cannot
work is one line on stderr and exit status 2 (127 for a command that cannot start)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from support.cli_runner import presa
from support.proxy_process import LIMIT, environment, proxy_stdio_command, run
from support.servers import SUPPORT

from presa_trio._proxy.stdio import STOP_GRACE

BROKEN = str(SUPPORT / "proxy_broken_stdio.py")
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}  # fmt: skip


def test_a_broken_stdio_server_is_reported_and_its_lines_pass_unchanged(tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    done = run(proxy_stdio_command(capture, sys.executable, BROKEN), stdin=json.dumps(CALL) + "\n")
    answer = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"resultType": "complete", "content": "not a list"},
    }
    assert done.stdout == json.dumps(answer) + "\ndebug output on stdout\n"  # byte for byte
    assert done.returncode == 1  # --check, and findings; else the child's 3
    said = done.stderr.splitlines()
    # The child's stderr is passed through as it comes, so it may fall anywhere among ours.
    assert "the end of input" in said
    assert said[-1].startswith("presa-trio proxy: 3 line(s) recorded, ")
    assert (
        'presa-trio proxy: 2: CallToolResult at /result/content: "not a list" is not of type '
        '"array"'
    ) in said
    assert "presa-trio proxy: 3: JSON at /: the body is not JSON" in said
    lines = [json.loads(line) for line in capture.read_text().splitlines()]
    assert [(line["direction"], "message" in line) for line in lines] == [
        ("client", True),
        ("server", True),
        ("server", False),
    ]
    assert lines[2]["body"] == "debug output on stdout\n"


def test_the_child_exit_status_is_the_proxy_s_without_check(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "presa_trio", "proxy", "--stdio", "--quiet", "--",
                sys.executable, BROKEN])  # fmt: skip
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr.splitlines() == [
        "the end of input",
        "presa-trio proxy: 0 line(s) recorded, 0 finding(s)",
    ]


def test_a_command_that_cannot_start_is_one_line_and_127() -> None:
    done = presa("proxy", "--stdio", "--", "/nonexistent/server")
    assert done.returncode == 127
    assert done.stderr.splitlines()[0] == (
        "presa-trio proxy: cannot start '/nonexistent/server': No such file or directory"
    )


def test_a_command_line_that_cannot_work_is_one_line_and_exit_status_2(tmp_path: Path) -> None:
    cases = {
        ("--stdio",): "presa-trio proxy: --stdio needs the server's command after --: "
        "--stdio -- CMD ARGS",
        ("--upstream", "ftp://x/mcp"): "presa-trio proxy: --upstream must be an http(s) URL, "
        "got 'ftp://x/mcp'",
        ("--upstream", "http://127.0.0.1:1/mcp", "--listen", "nowhere"): "presa-trio proxy: "
        "--listen expects HOST:PORT, got 'nowhere'",
        ("--upstream", "http://127.0.0.1:1/mcp", "--capture", str(tmp_path / "no" / "f")):
        f"presa-trio proxy: cannot write {tmp_path / 'no' / 'f'}: No such file or directory",
        ("--upstream", "http://127.0.0.1:1/mcp", "--", "cat"): "presa-trio proxy: a command "
        "after -- is for --stdio",
    }  # fmt: skip
    for args, said in cases.items():
        done = presa("proxy", *args)
        assert (done.returncode, done.stderr.splitlines()) == (2, [said]), args
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        done = presa("proxy", "--upstream", "http://127.0.0.1:1/mcp", "--listen", address)
    assert (done.returncode, done.stderr.splitlines()) == (
        2, [f"presa-trio proxy: cannot listen on {address}: Address already in use"]
    )  # fmt: skip
    neither = presa("proxy")
    assert neither.returncode == 2
    assert "one of the arguments --upstream --stdio is required" in neither.stderr


STUBBORN = str(SUPPORT / "proxy_stubborn_stdio.py")


def test_a_child_that_outlives_its_input_is_stopped_after_the_grace() -> None:
    started = time.monotonic()
    done = run([sys.executable, "-m", "presa_trio", "proxy", "--stdio", "--", sys.executable,
                STUBBORN])  # fmt: skip
    assert done.returncode == 128 + signal.SIGTERM  # SIGTERM after STOP_GRACE
    assert time.monotonic() - started >= STOP_GRACE
    assert done.stderr.splitlines()[0] == "ready"


def test_sigterm_to_the_proxy_stops_its_child_and_the_proxy_says_so(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "presa_trio", "proxy", "--stdio", "--", sys.executable,
               STUBBORN]  # fmt: skip
    with open(tmp_path / "stderr", "wb") as err:
        proxy = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
            env=environment(),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + LIMIT
        while b"ready" not in (tmp_path / "stderr").read_bytes():
            assert time.monotonic() < deadline and proxy.poll() is None
            time.sleep(0.02)
        proxy.send_signal(signal.SIGTERM)
        assert proxy.wait(timeout=LIMIT) == 128 + signal.SIGTERM  # the child's death
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
        assert proxy.stdin is not None and proxy.stdout is not None
        proxy.stdin.close()
        proxy.stdout.close()


def test_quiet_prints_no_finding_only_the_count(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "presa_trio", "proxy", "--stdio", "--quiet", "--check",
               "--", sys.executable, BROKEN]  # fmt: skip
    done = run(command, stdin=json.dumps(CALL) + "\n")
    assert done.returncode == 1  # found, though not printed
    ours = [line for line in done.stderr.splitlines() if line.startswith("presa-trio proxy: ")]
    assert len(ours) == 1 and ours[0].startswith("presa-trio proxy: 3 line(s) recorded, ")
    assert not ours[0].endswith(" 0 finding(s)")
