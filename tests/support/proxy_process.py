"""Run ``presa-trio proxy`` as a user does, in a process of its own on 127.0.0.1, for the
proxy's tests: its stderr goes to a file the test reads while the proxy runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.servers import ROOT, SUPPORT, Served, free_port, wait_listening

LIMIT = 60.0  # seconds for anything awaited from the proxy (a bound, not a pace)


@dataclass
class Proxy:
    served: Served
    capture: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.served.port}/mcp"

    @property
    def port(self) -> int:
        return self.served.port

    def stderr(self) -> str:
        return self.served.log()

    def wait_for(self, text: str, seconds: float = LIMIT) -> str:
        """The proxy's stderr once it holds ``text``; AssertionError after ``seconds``."""
        deadline = time.monotonic() + seconds
        while text not in (seen := self.stderr()):
            assert time.monotonic() < deadline, f"no {text!r} on the proxy's stderr:\n{seen}"
            time.sleep(0.02)
        return seen

    def stop(self) -> int:
        """SIGINT, as Ctrl-C; the proxy's exit status."""
        if self.served.alive():
            self.served.process.send_signal(signal.SIGINT)
        return self.served.process.wait(timeout=LIMIT)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.capture.read_text().splitlines()]


def environment() -> dict[str, str]:
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join(
        [str(SUPPORT), str(ROOT), environ.get("PYTHONPATH", "")]
    )
    return environ


@contextmanager
def running_proxy(upstream: str, scratch: Path, *args: str) -> Iterator[Proxy]:
    """``presa-trio proxy --upstream UPSTREAM --capture ... --check ARGS`` on a free port of
    127.0.0.1 until the block ends (then stopped, SIGKILL at worst)."""
    port = free_port()
    capture, log_path = scratch / "capture.jsonl", scratch / "proxy.stderr"
    command = [sys.executable, "-m", "presa_trio", "proxy", "--upstream", upstream, "--check",
               "--listen", f"127.0.0.1:{port}", "--capture", str(capture), *args]  # fmt: skip
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL, stderr=log
        )
    served = Served(port, process, log_path)
    try:
        wait_listening(served, "presa-trio proxy")
        yield Proxy(served, capture)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def proxy_stdio_command(capture: Path, *server: str) -> list[str]:
    """The command that runs ``server`` on stdio behind ``presa-trio proxy --stdio``."""
    return [sys.executable, "-m", "presa_trio", "proxy", "--stdio", "--capture", str(capture),
            "--check", "--", *server]  # fmt: skip


def run(command: Sequence[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command), cwd=ROOT, env=environment(), input=stdin, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
