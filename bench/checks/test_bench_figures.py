"""What the benchmarks print, checked by hand (``.venv/bin/python -m pytest bench/checks``, about
15 s; the suite runs each script once at its smallest size, tests/bench/test_benches_run.py):
the slower modes of ``asgi_profile.py`` print their figures, the in-process breakdown names
every stage, and the task opcodes are split by whose code runs them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("bench/asgi_profile.py", "--opcodes"), r"presa-out-on\s+[\d,]+\n"),
        (
            ("bench/asgi_profile.py", "--cold", "-n", "20", "--runs", "1"),
            r"presa-out-on\s+\d+\.\d\s+\d+\.\d\n(.|\n)*beyond raw: .* us cold(.|\n)*"
            r"\n  validation\s+\d+\.\d\s+\d+\.\d",
        ),
    ],
    ids=[
        "asgi_profile-opcodes",
        "asgi_profile-cold",
    ],
)
def test_the_bench_runs_and_prints_its_figures(args: tuple[str, ...], expected: str) -> None:
    assert re.search(expected, run(*args)) is not None


def test_the_in_process_breakdown_names_every_stage_each_timed_on_its_own() -> None:
    """The breakdown issue 12 asks for: trio's machinery, parse, admission, validation,
    dispatch, handler and encode, each stage timed directly (so never below zero)."""
    out = run("bench/asgi_profile.py", "-n", "40", "--runs", "1")
    stages = [
        "trio: the raw exchange",
        "trio: the request nursery",
        "parse",
        "admission",
        "validation",
        "dispatch",
        "handler",
        "encode",
    ]
    for stage in stages:
        found = re.search(rf"^  {re.escape(stage)}\s+(-?\d+\.\d)\s", out, re.MULTILINE)
        assert found is not None, f"{stage!r} missing from:\n{out}"
        if stage != "trio: the request nursery":  # a difference of two whole-request timings
            assert float(found.group(1)) > 0, f"{stage!r} not positive in:\n{out}"


def test_the_task_opcodes_are_split_by_whose_code_runs_them() -> None:
    """``tasks_bench.py --opcodes``: each op's count is presa's, trio's and the harness's, which
    add up to it; trio's shape alone runs no presa code; a creation runs far more of trio than
    a plain call (its nursery, scopes and checkpoints); the ceiling that puts on creation."""
    out = run("bench/tasks_bench.py", "--opcodes")
    rows = {}
    for label in ("plain sync tools/call", "task creation", "tasks/get", "trio alone"):
        found = re.search(
            rf"^   {re.escape(label)}.*?\s([\d,]+)\s+\d\.\d\dx\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)$",
            out,
            re.MULTILINE,
        )
        assert found is not None, f"{label!r} missing from:\n{out}"
        total, presa, trio, harness = (int(g.replace(",", "")) for g in found.groups())
        assert abs(presa + trio + harness - total) <= 2, found.group(0)  # each rounded
        rows[label] = (presa, trio)
    assert rows["trio alone"][0] == 0 and rows["trio alone"][1] > 1_000
    assert rows["task creation"][1] > 10 * rows["plain sync tools/call"][1]
    ceiling = re.search(r"at most (\d\.\d\d)x \(trio's share.*?, (\d\.\d\d)x \(trio's shape", out)
    assert ceiling is not None, out
    assert 0 < float(ceiling.group(1)) < float(ceiling.group(2)) < 1
