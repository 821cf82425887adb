"""The benchmarks still run against today's code (a changed internal signature once broke them
unnoticed): each script, at its smallest size, exits 0 and prints its figures. The suite's one
smoke test of bench/; the slower checks of what the benches print are in bench/checks/, run by
hand (bench/README.md)."""

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
        (
            ("bench/asgi_profile.py", "-n", "40"),
            r"presa-out-on\s+\d+\.\d\n(.|\n)*folded\s+\d+\.\d\n(.|\n)*"
            r"presa-out-off beyond folded \(what presa's structure costs\): -?\d+\.\d us",
        ),
        (
            ("bench/tasks_bench.py", "--quick"),
            r"folded \(trio's shape, the question, a record; no presa\):\s+[\d,]+ B/task\n"
            r"   three questions in one ctx.input \(200 tasks\):\s+[\d,]+ B/task(.|\n)*"
            r"task creation .*\d\.\d\dx(.|\n)*"
            r"trio alone: spawn, nursery, deadline .*\d\.\d\dx\s"
            r"(.|\n)*a creation can be at most \d\.\d\dx a plain call",
        ),
        (
            (
                "bench/stdio_bench.py",
                "--requests",
                "50",
                "--reps",
                "1",
                "--server-cpu",
                "",
                "--client-cpu",
                "",
            ),
            r"requests/s \(median\)\n.*presa/raw\s+sdk/raw\n\s+1(\s+\d+\.\d){3}"
            r"(\s+\d+\.\d{3}){2}\n\s+16(.|\n)*bad answers: 0",
        ),
        (
            ("bench/legacy_tasks_bench.py", "-n", "20", "--runs", "2"),
            r"2025-11-25 tools/call with params.task:\s+[\d,]+\.\d \(.*\) us/creation\n"
            r"\s+session / 2026-07-28:\s+\d\.\d{3} \(",
        ),
        (
            ("bench/typed_bench.py", "--rows", "20", "-n", "5", "--runs", "1"),
            r"untyped\s+[\d,]+\.\d us/request(.|\n)*typed / untyped: \d+\.\d\dx",
        ),
        (
            ("bench/json_bench.py", "--seconds", "0.001"),
            r"200 rows\s+9,\d{3}(\s+[\d,]+\.\d){3}\s+\d\.\d\dx",
        ),
        (
            ("bench/listen_bench.py", "--rounds", "5"),
            r"resources, 1,000 streams: wanted by none\s+\d+\.\d\d \(\s*\d+\.\dx\)",
        ),
        (
            ("bench/registry_bench.py", "--sizes", "60,120"),
            r"120 declared,\s+resources/read, no template:\s+\d+\.\d us(.|\n)*"
            r"120 declared,\s+every page of tools/list:\s+\d+\.\d ms \(3 pages\)",
        ),
        (
            ("bench/middleware_bench.py", "-n", "20", "--runs", "1"),
            r"one no-op\s+\d+\.\d  \([+-]\d+\.\d us, \d\.\d{3}x\)",
        ),
        # what --instructions runs under valgrind, once per app: here without valgrind
        (("bench/asgi_profile.py", "--count-one", "presa-out-off", "-n", "20"), r"^$"),
        # http_work.py's servers and client (each answer checked), here without valgrind
        (
            (
                "bench/http_work.py",
                "--no-valgrind",
                "--requests",
                "20",
                "--apps",
                "presa-out-on,raw",
            ),
            r"presa-out-on\s+served.*\nraw\s+served",
        ),
        # two real workers on SQLite (a few answers across), in process, the reads counted
        (
            (
                "bench/sessions_bench.py",
                "--parts",
                "cross,inproc,reads",
                "--stores",
                "sqlite",
                "--runs",
                "1",
                "--samples",
                "5",
                "--warm",
                "2",
                "-n",
                "20",
                "--turns",
                "1",
                "--reads",
                "20",
            ),
            r"sqlite, answered to B \(across\)\s+p50 \d+\.\d\d(.|\n)*"
            r"session / 2026-07-28:\s+\d+\.\d{3} (.|\n)*"
            r"a session's request: \d+\.\d\d",
        ),
        # what its instruction counts run under valgrind, here without valgrind
        (("bench/sessions_bench.py", "--count-one", "modern,legacy", "-n", "20"), r"^$"),
        (("bench/tasks_bench.py", "--count-one", "creation", "-n", "20"), r"^$"),
        (
            # two workers on memory and on SQLite, two clients, half a second each
            (
                "bench/tasks_concurrency.py",
                "--stores",
                "memory,sqlite",
                "--clients",
                "2",
                "--reps",
                "1",
                "--seconds",
                "0.5",
                "--warm",
                "0.2",
            ),
            r"2 concurrent client\(s\)\n\s+memory: [\d,]+\.\d(.|\n)*sqlite: [\d,]+\.\d"
            r"(.|\n)*x memory \d\.\d{3}(.|\n)*database per task: calls \d+\.\d\d(.|\n)*"
            r"errors: 0",
        ),
        # a short stream resumed, memory and SQLite (each replay's length is checked)
        (
            (
                "bench/resume_bench.py",
                "--stores",
                "memory,sqlite",
                "--events",
                "20",
                "--samples",
                "2",
                "--runs",
                "1",
            ),
            r"memory\s+resume\s+\d+\.\d\d(.|\n)*sqlite\s+logging costs the call \d+\.\d\dx",
        ),
        # every peer's servers, each path and the parked tasks once, briefly, unpinned
        (
            ("bench/peers.py", "--quick", "--parked", "20", "--server-cpu", "", "--client-cpu", ""),
            r"plain\s+raw ASGI app\s+[\d,]+\.\d \((.|\n)*"
            r"task\s+FastMCP \(asyncio worker\)\s+[\d,]+\.\d \(.*\)\s+\d\.\d{3} \((.|\n)*"
            r"session\s+official SDK\s+[\d,]+\.\d(.|\n)*"
            r"parked task(.|\n)*presa_trio\s+-?[\d,]+ \(.*\) B\n(.|\n)*errors: 0",
        ),
        (
            ("bench/declare_bench.py", "-n", "3"),
            r"no hint:\s+\d+\.\d us per declaration(.|\n)*list\[dataclass\]:\s+\d+\.\d us",
        ),
        (
            ("bench/validation_bench.py", "--repeat", "1", "--min-time", "0.01"),
            r"capture of 10000 messages \(CaptureChecker\.check\): \d+\.\d{3} s, 0 findings",
        ),
    ],
    ids=[
        "asgi_profile",
        "tasks_bench",
        "stdio_bench",
        "legacy_tasks_bench",
        "typed_bench",
        "json_bench",
        "listen_bench",
        "registry_bench",
        "middleware_bench",
        "asgi_profile-count-one",
        "http_work-served",
        "sessions_bench",
        "sessions_bench-count-one",
        "tasks_bench-count-one",
        "tasks_concurrency",
        "resume_bench",
        "peers",
        "declare_bench",
        "validation_bench",
    ],
)
def test_the_bench_runs_and_prints_its_figures(args: tuple[str, ...], expected: str) -> None:
    assert re.search(expected, run(*args)) is not None
