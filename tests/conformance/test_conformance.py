"""Score fixtures/conformance.py with the official MCP conformance runner.

This runs ``scripts/conformance`` (which installs Node >= 22 and the pinned runner
with npm on first use, starts the fixture under hypercorn's trio worker on
127.0.0.1 and compares the result with conformance/expected-failures.txt) and
requires it to exit 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from support.postgres_cluster import Cluster as Database
from support.round_robin import balance
from support.servers import running

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "conformance"
TIMEOUT_S = 900


@pytest.mark.conformance
def test_conformance_runner_is_clean() -> None:
    score()


@pytest.mark.conformance
def test_conformance_runner_is_clean_with_three_workers_sharing_sqlite(tmp_path: Path) -> None:
    """The same runs against ``hypercorn --workers 3`` with ``PRESA_STORE=sqlite:///...``:
    every request may land on another worker, and the score must not change; the older
    era's set three times in a row against the same workers (its sessions live on)."""
    env = {"PRESA_STORE": f"sqlite:///{tmp_path}/conformance.db"}
    with running("fixtures.conformance:app", args=("--workers", "3"), env=env) as served:
        url = f"http://127.0.0.1:{served.port}/mcp"
        score("--url", url)
        for _ in range(2):
            score("--url", url, "--revision", "2025-11-25")


@pytest.mark.conformance
async def test_the_initialize_era_is_clean_on_two_instances_sharing_postgresql(
    postgres: Database,
) -> None:
    """Two instances (as on two hosts) sharing one PostgreSQL database behind a round-robin
    balancer: the 2025-11-25 set clean three runs in a row, each connection going to the
    next instance (a session opened on one is served by the other)."""
    env = {"PRESA_STORE": postgres.new_database()}
    with (
        running("fixtures.conformance:app", env=env) as one,
        running("fixtures.conformance:app", env=env) as two,
    ):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(balance, [one.port, two.port])
            url = f"http://127.0.0.1:{port}/mcp"
            for _ in range(3):
                await trio.to_thread.run_sync(score, "--url", url, "--revision", "2025-11-25")
            nursery.cancel_scope.cancel()


@pytest.mark.conformance
def test_conformance_runner_is_clean_with_three_workers_sharing_postgresql(
    postgres: Database,
) -> None:
    """And with ``PRESA_STORE=postgresql://...`` (a database of its own in the run's cluster)."""
    score("--workers", "3", PRESA_STORE=postgres.new_database())


def score(*args: str, **environment: str) -> None:
    assert SCRIPT.is_file(), f"missing {SCRIPT}"
    env = dict(os.environ)
    env["PYTHON"] = sys.executable
    env.pop("PRESA_ROOT", None)
    env.pop("PRESA_STORE", None)
    env.update(environment)
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # SIGTERM first so the script stops the fixture and the runner itself.
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            output, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
        print(output)
        pytest.fail(
            f"scripts/conformance did not finish within {TIMEOUT_S}s; output:\n{output}",
            pytrace=False,
        )
    print(output)
    hint = ""
    if proc.returncode == 2:
        hint = (
            "\n(exit 2 is a setup error, e.g. npm is missing (it installs Node >= 22 and "
            "the conformance runner) or the fixture did not start; see the output)"
        )
    assert proc.returncode == 0, (
        f"scripts/conformance exited {proc.returncode}{hint}\n--- output ---\n{output}"
    )
