"""Run ``presa-trio`` as a user does: a subprocess of its own, from the repository's root,
with tests/support importable (so ``cli_client_app:server`` names the client tests' app)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

from support.servers import ROOT, SUPPORT

LIMIT = 120  # seconds a command may take before the test fails (a bound, not a pace)


def presa(
    *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m presa_trio ARGS``: its exit status, stdout and stderr. ``stdin`` is what
    it reads (nothing when None: its input is empty, not a terminal); ``env`` adds to the
    environment."""
    environ = {**os.environ, **(env or {})}
    environ["PYTHONPATH"] = os.pathsep.join(
        [str(SUPPORT), str(ROOT), environ.get("PYTHONPATH", "")]
    )
    return subprocess.run(
        [sys.executable, "-m", "presa_trio", *args],
        cwd=ROOT,
        env=environ,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


def serve_stdio(app: str = "cli_client_app:server") -> list[str]:
    """The command that serves ``app`` on stdio, for ``--stdio --``."""
    return [sys.executable, "-m", "presa_trio", "serve", app, "--stdio"]
