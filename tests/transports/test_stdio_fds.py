"""``serve_stdio`` on the process's own fds 0 and 1 leaves them as it found them.

It runs in a child process, so that fds 0 and 1 are real pipes of that child: the child
records their blocking mode and its open fds before and after ``serve_stdio`` returns, and
reports on stderr (stdout carries MCP messages only).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import trio

CHILD = textwrap.dedent(
    """
    import json
    import os
    import sys

    import trio

    from presa_trio import Server, serve_stdio

    server = Server("fds", "1")


    @server.tool()
    def ping() -> str:
        '''Answers pong.'''
        return "pong"


    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))


    trio.run(trio.sleep, 0)  # trio's own one-time setup, outside the measurement
    before = {"stdin": os.get_blocking(0), "stdout": os.get_blocking(1), "fds": fds()}
    trio.run(serve_stdio, server)
    after = {"stdin": os.get_blocking(0), "stdout": os.get_blocking(1), "fds": fds()}
    sys.stderr.write("REPORT " + json.dumps({"before": before, "after": after}) + "\\n")
    """
)

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "parent", "version": "1"},
}


async def test_serving_on_fds_0_and_1_restores_them(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "ping", "arguments": {}, "_meta": META},
    }
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, str(script)],
            stdin=json.dumps(request).encode() + b"\n",  # one line, then EOF (a closed pipe)
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 1, lines
    response = json.loads(lines[0])
    assert response["id"] == 1
    assert response["result"]["content"] == [{"type": "text", "text": "pong"}]

    reports = [line for line in stderr.splitlines() if line.startswith("REPORT ")]
    assert len(reports) == 1, stderr
    report = json.loads(reports[0].removeprefix("REPORT "))
    assert report["before"]["stdin"] is True and report["before"]["stdout"] is True
    assert report["after"]["stdin"] is True, "fd 0 was left non-blocking"
    assert report["after"]["stdout"] is True, "fd 1 was left non-blocking"
    assert report["after"]["fds"] == report["before"]["fds"], "serve_stdio leaked fds"
