"""What declaring a tool costs, by its return hint: ``@server.tool()`` on a function that takes
two arguments and returns ``str``, ``int``, ``dict[str, int]``, a TypedDict, a dataclass, a
pydantic model, ``list`` of a dataclass, or has no hint. Declaring builds the tool's input and
output schemas, its argument converter and its validators, once; a call pays none of it.

Prints the median of N declarations per hint (each on a fresh server, so nothing is cached
per server), in microseconds.

    PYTHONPATH=. .venv/bin/python bench/declare_bench.py [-n 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from presa_trio import Server


class Totals(TypedDict):
    count: int
    names: list[str]


@dataclass
class Point:
    x: float
    y: float
    label: str | None = None


class Reading(BaseModel):
    sensor: str
    value: float


def functions() -> dict[str, Callable[..., Any]]:
    def none(city: str, days: int = 3):  # type: ignore[no-untyped-def]
        return city

    def text(city: str, days: int = 3) -> str:
        return city

    def integer(city: str, days: int = 3) -> int:
        return days

    def mapping(city: str, days: int = 3) -> dict[str, int]:
        return {city: days}

    def typed_dict(city: str, days: int = 3) -> Totals:
        return {"count": days, "names": [city]}

    def dataclass_(city: str, days: int = 3) -> Point:
        return Point(days, days)

    def model(city: str, days: int = 3) -> Reading:
        return Reading(sensor=city, value=days)

    def points(city: str, days: int = 3) -> list[Point]:
        return [Point(days, days)]

    return {
        "no hint": none,
        "str": text,
        "int": integer,
        "dict[str, int]": mapping,
        "TypedDict": typed_dict,
        "dataclass": dataclass_,
        "pydantic model": model,
        "list[dataclass]": points,
    }


def measure(fn: Callable[..., Any], n: int) -> float:
    times = []
    for _ in range(n):
        server = Server("declare-bench", "1", loop_warning=None)
        start = time.perf_counter()
        server.tool()(fn)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="declarations per hint (300)")
    args = parser.parse_args()
    for label, fn in functions().items():
        measure(fn, 5)  # warm: imports, pydantic's first build of each class
        print(f"{label:>16}: {measure(fn, args.n):8.1f} us per declaration")


if __name__ == "__main__":
    main()
