"""Start real servers under hypercorn's trio worker on 127.0.0.1, and stop them afterwards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve(app: str, extra_path: Path | None = None) -> Iterator[int]:
    port = free_port()
    env = dict(os.environ)
    paths = [str(ROOT)] + ([str(extra_path)] if extra_path else [])
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    # A file, not a pipe: a chatty server must never block on a full pipe.
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hypercorn",
            "--worker-class",
            "trio",
            "--bind",
            f"127.0.0.1:{port}",
            app,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    output = log.read().decode(errors="replace")
                    raise RuntimeError(
                        f"{app} did not start on 127.0.0.1:{port}:\n{output}"
                    ) from None
                time.sleep(0.05)
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.fixture(scope="session")
def e2e_port() -> Iterator[int]:
    yield from serve("e2e_app:app", ROOT / "tests" / "e2e")


@pytest.fixture(scope="session")
def fixture_port() -> Iterator[int]:
    yield from serve("fixtures.conformance:app")
