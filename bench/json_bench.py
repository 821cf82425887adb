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
from presa_trio._wire.jsonrpc import (
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.2, help="per timing run (0.2)")
    args = parser.parse_args()
    readers: dict[str, Callable[[bytes], object]] = {
        "orjson.loads": orjson.loads,
        "decode_json": decode_json,
        "standard library": _decode_strictly,
    }
    print("us per body (best of 5); decode_json / orjson: what presa's checks add to the parse")
    print(f"{'body':<28}{'bytes':>10}" + "".join(f"{name:>18}" for name in readers) + "  ratio")
    for label, body in bodies().items():
        assert decode_json(body) == orjson.loads(body)  # the same value, or the figures lie
        us = {name: per_call_us(read, body, args.seconds) for name, read in readers.items()}
        cells = "".join(f"{us[name]:>18,.1f}" for name in readers)
        ratio = us["decode_json"] / us["orjson.loads"]
        print(f"{label:<28}{len(body):>10,}{cells}  {ratio:4.2f}x")
    writers: dict[str, Callable[[Any], bytes]] = {
        "orjson.dumps": orjson.dumps,
        "encode": encode,
        "standard library": _encode_strictly,
    }
    print("\nus per response (best of 5); encode / orjson: what presa's check adds")
    print(f"{'response':<28}{'bytes':>10}" + "".join(f"{name:>18}" for name in writers) + "  ratio")
    for label, message in responses().items():
        assert json.loads(encode(message)) == message
        us = {name: per_call_us(write, message, args.seconds) for name, write in writers.items()}
        cells = "".join(f"{us[name]:>18,.1f}" for name in writers)
        ratio = us["encode"] / us["orjson.dumps"]
        print(f"{label:<28}{len(encode(message)):>10,}{cells}  {ratio:4.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
