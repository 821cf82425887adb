"""``presa-trio call`` asks a person on a terminal: its stdin is a pseudo-terminal here, and
the test types into it. Field by field, each typed by the question's schema; end of input
(Ctrl-D) declines."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest
from support.cli_runner import LIMIT
from support.servers import ROOT, SUPPORT

pytestmark = pytest.mark.e2e


def on_a_terminal(*args: str, typed: bytes) -> subprocess.CompletedProcess[str]:
    """Run ``presa-trio ARGS`` with a terminal as its stdin, ``typed`` typed into it."""
    controller, terminal = pty.openpty()
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), str(ROOT)])}
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "presa_trio", *args],
            cwd=ROOT,
            env=environ,
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(terminal)
        os.write(controller, typed)  # the terminal keeps it until the command reads it
        stdout, stderr = process.communicate(timeout=LIMIT)
    finally:
        os.close(controller)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_a_task_question_is_asked_field_by_field_on_the_terminal() -> None:
    done = on_a_terminal("call", "cli_client_app:server", "ask_task", typed=b"Ada\n")
    assert (done.returncode, done.stdout) == (0, "Hello, Ada\n"), done.stderr
    assert "the server asks (name): Your name?\n  name (string): " in done.stderr


def test_end_of_input_on_the_terminal_declines() -> None:
    done = on_a_terminal("call", "cli_client_app:server", "ask", typed=b"\x04")
    assert (done.returncode, done.stdout) == (0, "no name (decline)\n"), done.stderr
