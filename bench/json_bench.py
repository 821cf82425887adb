"""Reading a request and writing a response: presa's ``decode_json`` and ``encode`` beside orjson
alone and the standard library, from the benchmark's one `tools/call` to a megabyte.

``decode_json`` is orjson plus the checks that make it strict (a run of 19 digits, the
nesting limit), ``encode`` orjson plus the check for what it would write as ``null`` (NaN,
the infinities): what the checks add to orjson's own work is the figure to watch. Not
measured: anything between (validation, the handler), HTTP.
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.http_bench import request_body
from presa_trio._protocol.jsonrpc import (
    _decode_strictly,
    _encode_strictly,
    decode_json,
    encode,
    result_message,
)


def call_with(arguments: dict[str, Any]) -> bytes:
    """A ``tools/call`` request carrying ``arguments``, as a client writes it."""
    message = json.loads(request_body("test_simple_text"))
    message["params"]["arguments"] = arguments
    return json.dumps(message, separators=(",", ":")).encode()


def bodies() -> dict[str, bytes]:
    rows = [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(200)]
    texts = [{"text": "x" * 1000, "n": i} for i in range(1000)]
    records = [{"id": i, "ok": True, "at": [i, i + 1]} for i in range(25_000)]
    return {
        "the benchmark's tools/call": request_body("test_simple_text").encode(),
        "200 rows": call_with({"rows": rows}),
        "1,000 texts of 1 KB": call_with({"items": texts}),
        "25,000 small records": call_with({"records": records}),
    }


def responses() -> dict[str, dict[str, Any]]:
    rows = [{"id": i, "name": f"row {i}", "score": i / 2} for i in range(200)]
    with_nulls = [{**row, "note": None} for row in rows]
    text = [{"type": "text", "text": "This is a simple text response for testing."}]
    return {
        "the benchmark's result": result_message(1, {"content": text}),
        "200 rows": result_message(1, {"content": text, "structuredContent": {"rows": rows}}),
        "200 rows, a null in each": result_message(
            1, {"content": text, "structuredContent": {"rows": with_nulls}}
        ),
    }


def per_call_us(work: Callable[[Any], object], data: Any, seconds: float = 0.2) -> float:
    """Best of five runs of about ``seconds`` each, microseconds per call."""
    number = max(1, int(seconds / max(timeit.timeit(lambda: work(data), number=1), 1e-7)))
    return min(timeit.repeat(lambda: work(data), number=number, repeat=5)) / number * 1e6


def table(
    kind: str,
    cases: dict[str, Any],
    contenders: dict[str, Callable[[Any], object]],
    size: Callable[[Any], int],
    seconds: float,
) -> None:
    """Each case timed with each contender, us per call; the ratio is the second contender's
    (presa's) time to the first's (orjson's)."""
    names = list(contenders)
    print(f"{kind:<28}{'bytes':>10}" + "".join(f"{name:>18}" for name in names) + "  ratio")
    for label, case in cases.items():
        us = {name: per_call_us(work, case, seconds) for name, work in contenders.items()}
        cells = "".join(f"{us[name]:>18,.1f}" for name in names)
        print(f"{label:<28}{size(case):>10,}{cells}  {us[names[1]] / us[names[0]]:4.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.2, help="per timing run (0.2)")
    args = parser.parse_args()
    requests, answers = bodies(), responses()
    for body in requests.values():  # the same values, or the figures would lie
        assert decode_json(body) == orjson.loads(body)
    for message in answers.values():
        assert json.loads(encode(message)) == message
    print("us per body (best of 5); decode_json / orjson: what presa's checks add to the parse")
    readers = {"orjson.loads": orjson.loads, "decode_json": decode_json}
    table("body", requests, {**readers, "standard library": _decode_strictly}, len, args.seconds)
    print("\nus per response (best of 5); encode / orjson: what presa's check adds")
    writers = {"orjson.dumps": orjson.dumps, "encode": encode, "standard library": _encode_strictly}
    table("response", answers, writers, lambda message: len(encode(message)), args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
