"""Run every ``console`` block of docs/guides/testing.md (checking a capture): each ``$
COMMAND`` line runs in a shell from the repository's root, with this interpreter's
``presa-trio`` first on the PATH, and must print what the block shows (stdout, then stderr),
ending with ``[exit status N]`` when N is not 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "testing.md"
BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)
STATUS = re.compile(r"\[exit status (\d+)\]")


def sessions() -> list[tuple[str, str, int]]:
    found = []
    for block in BLOCK.findall(GUIDE.read_text()):
        command, _, shown = block.partition("\n")
        assert command.startswith("$ "), command
        lines = shown.splitlines()
        status = 0
        if lines and (end := STATUS.fullmatch(lines[-1])):
            status, lines = int(end.group(1)), lines[:-1]
        found.append((command[2:], "\n".join(lines) + "\n" if lines else "", status))
    return found


def test_the_guide_has_its_examples() -> None:
    assert len(sessions()) >= 2


@pytest.mark.parametrize(("command", "shown", "status"), sessions(), ids=lambda v: str(v)[:60])
def test_a_console_example_prints_what_the_guide_shows(
    command: str, shown: str, status: int
) -> None:
    environ = dict(os.environ)
    environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environ["PATH"]])
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == status, done.stderr
    assert done.stdout + done.stderr == shown
