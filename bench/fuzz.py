"""The HTTP fuzz run by hand: the families and oracle of ``tests/fuzz`` for 100,000 cases.

Each family's share of ``--examples`` Hypothesis examples (scenarios) runs in batches, each
batch against one run of a fresh fixture server (``build_server()``, which validates its
responses; in process, no sockets), so task stores and listen buses start empty now and then,
as restarts do. Problems are counted, not raised: the run goes on, and prints what it saw.

    .venv/bin/python bench/fuzz.py                     # 100,000 examples
    .venv/bin/python bench/fuzz.py --examples 2000 --seed 7 --jobs 2

The exit status is 1 when the oracle found anything (a failure or a logged traceback).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz.strategies import FAMILIES, Stats, run_family  # noqa: E402

DEFAULT_BATCH = 1_000  # under the task store's 1,000 tasks per principal


def run_batch(job: tuple[str, int, int]) -> Stats:
    family, examples, seed = job
    return trio.run(lambda: run_family(family, examples, seed=seed, raise_failures=False))


def plan(total: int, families: list[str], batch: int, seed: int) -> list[tuple[str, int, int]]:
    """Split ``total`` examples evenly over ``families``, in batches of at most ``batch``."""
    jobs: list[tuple[str, int, int]] = []
    share, extra = divmod(total, len(families))
    for index, family in enumerate(families):
        left = share + (1 if index < extra else 0)
        number = 0
        while left > 0:
            size = min(batch, left)
            jobs.append((family, size, seed * 1_000_003 + index * 10_007 + number))
            left -= size
            number += 1
    return jobs


def histogram(counter: dict[str, int] | dict[int, int], total: int) -> list[str]:
    rows = sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))
    share = 100 / max(total, 1)
    return [f"  {key!s:>8}  {count:>9,}  {count * share:6.2f}%" for key, count in rows]


def report(stats: Stats, elapsed: float, args: argparse.Namespace, seed: int) -> str:
    statuses = {("no answer (client left)" if k == 0 else k): v for k, v in stats.statuses.items()}
    lines = [
        f"presa_trio HTTP fuzz, {datetime.now(UTC):%Y-%m-%d %H:%M UTC}, seed {seed}",
        f"command: {' '.join(sys.argv)}",
        "",
        f"cases run: {stats.scenarios:,} Hypothesis examples (scenarios), "
        f"{stats.cases:,} HTTP exchanges",
        "per family (examples): "
        + ", ".join(f"{name} {count:,}" for name, count in sorted(stats.families.items())),
        "",
        "statuses (exchanges):",
        *histogram(statuses, stats.cases),
        "",
        "JSON-RPC outcome (exchanges with a response):",
        *histogram(dict(stats.codes), sum(stats.codes.values())),
        "",
        f"failures: {stats.failure_count}",
        f"tracebacks logged: {stats.tracebacks}",
        f"ERROR records logged: {stats.error_logs}",
        f"HTTP 500 answers: {stats.five_hundred_count}",
        f"listen streams hung up after their news: {stats.hung_up:,}",
        f"slowest exchange: {stats.slowest * 1000:.1f} ms ({stats.slowest_case})",
        f"elapsed: {elapsed:.1f} s ({stats.cases / max(elapsed, 1e-9):,.0f} exchanges/s, "
        f"{args.jobs} job(s))",
    ]
    if stats.five_hundreds:
        lines += ["", "500 answers (first ones):", *stats.five_hundreds]
    if stats.failures:
        lines += ["", "failures (first ones):", *stats.failures]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100_000, help="Hypothesis examples")
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="examples per server run")
    parser.add_argument("--jobs", type=int, default=1, help="processes running batches")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated")
    args = parser.parse_args()
    families = [f for f in args.families.split(",") if f]
    unknown = set(families) - set(FAMILIES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}; known: {sorted(FAMILIES)}")
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    jobs = plan(args.examples, families, args.batch, seed)
    total = Stats()
    started = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for done, stats in enumerate(pool.map(run_batch, jobs), 1):
                total.merge(stats)
                _progress(done, len(jobs), total, started)
    else:
        for done, job in enumerate(jobs, 1):
            total.merge(run_batch(job))
            _progress(done, len(jobs), total, started)
    print(report(total, time.perf_counter() - started, args, seed))
    return 1 if total.failure_count or total.tracebacks else 0


def _progress(done: int, of: int, stats: Stats, started: float) -> None:
    print(
        f"[{done}/{of}] {stats.scenarios:,} examples, {stats.cases:,} exchanges, "
        f"{stats.failure_count} failures, {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
