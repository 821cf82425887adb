"""Run the commands of docs/guides/proxy.md as a reader does: the server and the proxy in
the background, the client, Ctrl-C to the proxy, then ``validate``; and the stdio command.
Each prints what the page shows. The page's ports (8000, 6277) become free ones, and the
commands run in a scratch folder with the repository importable (``examples.weather``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.servers import ROOT, Served, free_port, wait_listening

pytestmark = pytest.mark.e2e

GUIDE = ROOT / "docs" / "guides" / "proxy.md"
BLOCK = re.compile(r"<!-- proxy: (?P<name>\w+) -->\n```\w+\n(?P<body>.*?)```", re.DOTALL)


def blocks(ports: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Each marked block of the page: its command (without ``$ ``) and what it shows."""
    found = {}
    for match in BLOCK.finditer(GUIDE.read_text()):
        body = match.group("body")
        for shown, used in ports.items():
            body = body.replace(shown, used)
        first, _, rest = body.partition("\n")
        if first.startswith("$ "):
            found[match.group("name")] = (first[2:], rest)
        else:
            found[match.group("name")] = ("", body)
    return found


def environment() -> dict[str, str]:
    environ = dict(os.environ)
    environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environ["PATH"]])
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), environ.get("PYTHONPATH", "")])
    return environ


@contextmanager
def background(command: str, port: int, cwd: Path, log: Path) -> Iterator[Served]:
    with open(log, "wb") as out:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=cwd,
            env=environment(),
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    served = Served(port, process, log)
    try:
        wait_listening(served, command)
        yield served
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=environment(), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_http_walkthrough_prints_what_the_page_shows(tmp_path: Path) -> None:
    server_port, proxy_port = free_port(), free_port()
    page = blocks({"127.0.0.1:8000": f"127.0.0.1:{server_port}",
                   "127.0.0.1:6277": f"127.0.0.1:{proxy_port}"})  # fmt: skip
    assert set(page) == {"server", "proxy", "client", "stopped", "validate", "stdio"}
    serve, _ = page["server"]
    proxy, listening = page["proxy"]
    proxy += f" --listen 127.0.0.1:{proxy_port}"  # the page relies on the default port
    with (
        background(serve, server_port, tmp_path, tmp_path / "server.log"),
        background(proxy, proxy_port, tmp_path, tmp_path / "proxy.log") as running,
    ):
        client, answer = page["client"]
        done = shell(client, tmp_path)
        assert (done.returncode, done.stdout) == (0, answer), done.stderr
        running.process.send_signal(signal.SIGINT)  # Ctrl-C
        assert running.process.wait(timeout=60) == 0  # --check: nothing found
    assert running.log() == listening + page["stopped"][1]
    validate, shown = page["validate"]
    done = shell(validate, tmp_path)
    assert (done.returncode, done.stdout) == (0, shown)


def test_the_stdio_command_prints_what_the_page_shows(tmp_path: Path) -> None:
    command, shown = blocks({})["stdio"]
    done = shell(command, tmp_path)
    assert (done.returncode, done.stdout) == (0, shown), done.stderr
    assert done.stderr.endswith("presa-trio proxy: 4 line(s) recorded, 0 finding(s)\n")
    assert len((tmp_path / "stdio.jsonl").read_text().splitlines()) == 4
