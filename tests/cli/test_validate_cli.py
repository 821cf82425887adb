"""``presa-trio validate`` as a user runs it: findings stream as lines arrive on stdin, JSON
lines and JUnit XML for CI, a forced protocol version, and a help that says what it prints."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import IO

PRESA = [sys.executable, "-m", "presa_trio"]
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
WAIT = 60.0  # seconds for a line to come out (a bound, never a pace)

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "_meta": META}}
BAD_RESULT = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "done", "content": "no"}}
TYPO = {"jsonrpc": "2.0", "id": 2, "method": "tools/cal", "params": {"_meta": META}}


def presa(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PRESA, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


class Lines:
    """The lines a pipe delivers, each waited for at most ``WAIT`` (raw reads: no buffer
    hides a line that has already arrived)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.fd = stream.fileno()
        self.pending = b""

    def next(self) -> str:
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.fd], [], [], WAIT)
            assert ready, f"no output within {WAIT} s"
            chunk = os.read(self.fd, 65536)
            assert chunk, "the pipe closed"
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode()


def test_findings_stream_while_the_writer_pauses() -> None:
    """Each finding is printed as soon as its line arrives: the writer waits for it before
    it sends the next line, and the pipe stays open all the while."""
    with subprocess.Popen(
        [*PRESA, "validate", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        out = Lines(process.stdout)
        try:
            process.stdin.write((json.dumps(CALL) + "\n" + json.dumps(BAD_RESULT) + "\n").encode())
            process.stdin.flush()
            first = out.next()
            assert first.startswith("-:2: CallToolResult at /result/resultType:"), first
            assert first.endswith("[result-type]")
            second = out.next()
            assert second.startswith("-:2: CallToolResult at /result/content:"), second
            process.stdin.write((json.dumps(TYPO) + "\n").encode())  # the next line, only now
            process.stdin.flush()
            third = out.next()
            assert third.startswith("-:3: ClientRequest at /method:"), third
            process.stdin.close()
            assert process.wait(timeout=WAIT) == 1
            assert process.stderr is not None
            assert process.stderr.read() == b"3 message(s), 2 bad\n"
        finally:
            if process.poll() is None:
                process.kill()


def test_json_lines_and_a_summary(tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    capture.write_text("\n".join(json.dumps(m) for m in (CALL, BAD_RESULT, TYPO)) + "\n")
    result = presa("validate", "--json", str(capture))
    assert result.returncode == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[-1] == {"summary": {"messages": 3, "findings": 3, "bad_lines": 2}}
    assert [(f["line"], f["rule"], f["pointer"], f["direction"]) for f in lines[:-1]] == [
        (2, "result-type", "/result/resultType", "server"),
        (2, "schema", "/result/content", "server"),
        (3, "unknown-method", "/method", "client"),
    ]
    assert set(lines[0]) == {"file", "line", "rule", "direction", "definition", "pointer",
                             "message"}  # fmt: skip
    assert lines[0]["file"] == str(capture)
    assert result.stderr == ""


def test_junit_has_a_testcase_per_message_and_a_failure_per_finding(tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    capture.write_text("\n".join(json.dumps(m) for m in (CALL, BAD_RESULT, TYPO)) + "\n\n")
    report = tmp_path / "report.xml"
    result = presa("validate", "--junit", str(report), str(capture))
    assert result.returncode == 1
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == ["line 1", "line 2", "line 3"]
    assert [len(case.findall("failure")) for case in cases] == [0, 2, 1]
    failure = cases[2].find("failure")
    assert failure is not None and failure.get("type") == "unknown-method"
    assert json.loads(failure.text or "")["pointer"] == "/method"


def test_a_clean_capture_writes_a_passing_report(tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    capture.write_text(json.dumps(CALL) + "\n")
    report = tmp_path / "report.xml"
    assert presa("validate", "--junit", str(report), str(capture)).returncode == 0
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("1", "0")


def test_version_forces_a_revisions_schema() -> None:
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert presa("validate", "--version", "2025-06-18", "-", stdin=ping).returncode == 0
    as_2026 = presa("validate", "-", stdin=ping)
    assert as_2026.returncode == 1 and "[unknown-method]" in as_2026.stdout
    wrong = presa("validate", "--version", "1999-01-01", "-", stdin=ping)
    assert wrong.returncode == 2 and "invalid choice" in wrong.stderr


def test_bad_input_gets_a_finding_or_a_clear_error(tmp_path: Path) -> None:
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00\n")
    result = presa("validate", str(binary))
    assert result.returncode == 2 and "cannot read" in result.stderr
    assert "Traceback" not in result.stderr
    unwritable = presa("validate", "--junit", str(tmp_path / "no" / "r.xml"), "-", stdin="")
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr


def test_help_describes_the_output() -> None:
    text = presa("validate", "--help").stdout
    for words in ("FILE:LINE: DEFINITION at JSON-POINTER: REASON [RULE]", "--json", "--junit",
                  '"direction": "client"|"server"', "Exit status: 0", "--version"):  # fmt: skip
        assert words in text, words
