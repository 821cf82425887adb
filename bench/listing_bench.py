"""What a paginated ``*/list`` request costs as the registry grows.

Declares N tools, N resources and N prompts (N = 100, 1,000, 10,000) on one server with a page
size of 50, then times, through the dispatcher in process (as ``tasks_bench.py`` does), the
first page of each list (median of 50 requests) and a walk over every page of
``tools/list``. A page should cost what it holds, whatever else is declared; the ratio to
N = 100 (a full page too) is printed beside each figure.

    PYTHONPATH=. .venv/bin/python bench/listing_bench.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tasks_bench's in-process harness

from tasks_bench import body, rpc

from presa_trio import Server
from presa_trio._runtime import Runtime

SIZES = (100, 1_000, 10_000)
PAGE = 50
METHODS = ("tools/list", "resources/list", "prompts/list")


def build(n: int) -> Server:
    server = Server("listing-bench", "0", loop_warning=None, page_size=PAGE)

    def value() -> str:
        return "x"

    for i in range(n):
        server.tool(f"tool-{i:06d}", description="A tool.", thread=False)(value)
        server.resource(f"file:///srv/{i}", name=f"r{i}", thread=False)(value)
        server.prompt(f"prompt-{i:06d}", description="A prompt.", thread=False)(value)
    return server


async def first_page(server: Server, runtime: Runtime, method: str) -> float:
    data = body(method, {})
    await rpc(server, runtime, data)
    times = []
    for _ in range(50):
        started = time.perf_counter()
        result = await rpc(server, runtime, data)
        times.append(time.perf_counter() - started)
    assert len(result[next(iter(result))]) <= PAGE
    return statistics.median(times) * 1e6


async def every_page(server: Server, runtime: Runtime, n: int) -> float:
    started = time.perf_counter()
    cursor: Any = None
    seen = 0
    while True:
        result = await rpc(
            server, runtime, body("tools/list", {"cursor": cursor} if cursor else {})
        )
        seen += len(result["tools"])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == n
    return (time.perf_counter() - started) * 1e3


async def main(sizes: list[int]) -> None:
    print(f"listing_bench: python {sys.version.split()[0]}; page size {PAGE}")
    base: dict[str, float] = {}
    for n in sizes:
        server = build(n)
        async with server.open_runtime() as runtime:
            for method in METHODS:
                us = await first_page(server, runtime, method)
                base.setdefault(method, us)
                print(
                    f"  {n:>6,} declared, {method:>14} first page: {us:9.1f} us"
                    f" ({us / base[method]:6.1f}x)"
                )
            ms = await every_page(server, runtime, n)
            print(
                f"  {n:>6,} declared, every page of tools/list: {ms:9.1f} ms"
                f" ({n // PAGE + (n % PAGE > 0)} pages)"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="how many of each to declare, comma-separated (default: %(default)s)",
    )
    sizes = [int(n) for n in parser.parse_args().sizes.split(",")]
    trio.run(main, sizes)
