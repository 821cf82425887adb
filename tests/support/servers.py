"""Start real servers under hypercorn's trio worker on 127.0.0.1, and stop them afterwards.

The apps the tests serve (``e2e_app``, ``slow_app``, ...) and the client scripts they run live
beside this module, in ``SUPPORT``; the fixtures that serve them are in tests/conftest.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"  # the apps and client scripts, for PYTHONPATH and paths


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Served:
    """A running ``hypercorn --worker-class trio`` process: its port, its log, its process.

    ``python -m hypercorn`` runs a supervisor and one worker process; ``process`` is the
    supervisor, which stops the worker gracefully (lifespan shutdown included) at SIGTERM.
    """

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        return self.log_path.read_bytes().decode(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10) -> int:
        """A graceful stop, as an operator does it: SIGTERM to the supervisor; its status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)


@contextmanager
def running(
    app: str,
    extra_path: Path | None = None,
    log_path: Path | None = None,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    port: int | None = None,
) -> Iterator[Served]:
    """Run ``app`` under hypercorn's trio worker on 127.0.0.1 until the block ends.

    ``args`` go to hypercorn (``--workers 3``, say), ``env`` adds to the environment. The
    output goes to ``log_path`` (a temporary file when not given), and the end of it is noted
    on an error raised inside the block. At the end whatever still runs is stopped: SIGTERM
    to the whole process group, then SIGKILL.
    """
    with tempfile.TemporaryDirectory() as scratch:
        if log_path is None:
            log_path = Path(scratch) / "server.log"
        port = port or free_port()
        environ = {**os.environ, **(env or {})}
        paths = [str(ROOT)] + ([str(extra_path)] if extra_path else [])
        environ["PYTHONPATH"] = os.pathsep.join([*paths, environ.get("PYTHONPATH", "")])
        # A file, not a pipe: a chatty server must never block on a full pipe.
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "hypercorn",
                    "--worker-class",
                    "trio",
                    "--bind",
                    f"127.0.0.1:{port}",
                    *args,
                    app,
                ],
                cwd=ROOT,
                env=environ,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        served = Served(port, process, log_path)
        try:
            wait_listening(served, app)
            yield served
        except Exception as exc:  # a failure inside the block (a fixture's warm-up, say)
            exc.add_note(f"{app} server log, its end:\n{served.log()[-4000:]}")
            raise
        finally:
            _stop_group(process)


def wait_listening(served: Served, what: str, seconds: float = 30) -> None:
    """Return once ``served`` accepts connections on its port; RuntimeError with its log when
    it exits first or takes more than ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", served.port), timeout=0.5).close()
            return
        except OSError:
            if not served.alive() or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{what} did not start on 127.0.0.1:{served.port}:\n{served.log()}"
                ) from None
            time.sleep(0.05)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the process and its workers (its session's group), however far it got."""
    with suppress(ProcessLookupError):  # already stopped (and reaped), workers included
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_client(script: Path, *args: str) -> dict[str, Any]:
    """Run a client script in its own interpreter (an asyncio client, say, away from the
    test's trio loop); what it printed as JSON on its last line."""
    done = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout}\n{done.stderr}"
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def serve(app: str, extra_path: Path | None = None) -> Iterator[int]:
    """The port of ``app`` running under hypercorn (see ``running``), for a fixture."""
    with running(app, extra_path) as served:
        yield served.port
