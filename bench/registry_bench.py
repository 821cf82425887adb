"""What a paginated ``*/list`` request and a ``resources/read`` cost as the registry grows.

Declares N tools, N resources, N resource templates and N prompts (N = 100, 1,000, 10,000)
on one server with a page size of 50, then times, through the dispatcher in process (as
``tasks_bench.py`` does), the first page of each list and ``resources/read`` of a URI that
the last template declared holds and of one that no template holds (medians of 50
requests), and a walk over every page of ``tools/list``. A request should cost what it
holds or finds, whatever else is declared; the ratio to N = 100 is printed beside each
figure.

    PYTHONPATH=. .venv/bin/python bench/registry_bench.py
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

from presa_trio import Listing, Server
from presa_trio._kernel.runtime import Runtime

SIZES = (100, 1_000, 10_000)
PAGE = 50
LISTS = ("tools/list", "resources/list", "prompts/list")


def build(n: int) -> Server:
    server = Server("registry-bench", "0", loop_warning=None, listing=Listing(page_size=PAGE))

    def value() -> str:
        return "x"

    def named(name: str) -> str:
        return name

    for i in range(n):
        server.tool(f"tool-{i:06d}", description="A tool.", thread=False)(value)
        server.resource(f"file:///srv/{i}", name=f"r{i}", thread=False)(value)
        server.resource(f"file:///srv/t{i}/{{name}}", name=f"t{i}", thread=False)(named)
        server.prompt(f"prompt-{i:06d}", description="A prompt.", thread=False)(value)
    return server


def requests(n: int) -> dict[str, bytes]:
    """Each timed request, by the label it is printed under."""
    timed = {f"{method} first page": body(method, {}) for method in LISTS}
    found = {"uri": f"file:///srv/t{n - 1}/readme"}
    timed["resources/read, last template"] = body("resources/read", found)
    timed["resources/read, no template"] = body("resources/read", {"uri": "file:///none/x"})
    return timed


async def median_us(server: Server, runtime: Runtime, data: bytes) -> float:
    """The request's median time; the unknown URI's refusal (-32602) is timed the same."""

    async def once() -> None:
        try:
            await rpc(server, runtime, data)
        except RuntimeError as refused:  # rpc raises an error response's error object
            assert refused.args[0]["code"] == -32602, refused

    await once()
    times = []
    for _ in range(50):
        started = time.perf_counter()
        await once()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


async def every_page(server: Server, runtime: Runtime, n: int) -> float:
    started = time.perf_counter()
    cursor: Any = None
    seen = 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        result = await rpc(server, runtime, body("tools/list", params))
        seen += len(result["tools"])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == n
    return (time.perf_counter() - started) * 1e3


async def main(sizes: list[int]) -> None:
    print(f"registry_bench: python {sys.version.split()[0]}; page size {PAGE}")
    base: dict[str, float] = {}
    for n in sizes:
        server = build(n)
        async with server.open_runtime() as runtime:
            for label, data in requests(n).items():
                us = await median_us(server, runtime, data)
                base.setdefault(label, us)
                ratio = us / base[label]
                print(f"  {n:>6,} declared, {label:>30}: {us:9.1f} us ({ratio:6.1f}x)")
            ms = await every_page(server, runtime, n)
            pages = n // PAGE + (n % PAGE > 0)
            label = "every page of tools/list"
            print(f"  {n:>6,} declared, {label:>30}: {ms:9.1f} ms ({pages} pages)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="how many of each to declare, comma-separated (default: %(default)s)",
    )
    sizes = [int(n) for n in parser.parse_args().sizes.split(",")]
    trio.run(main, sizes)
