"""Micro-benchmark of presa_trio schema validation per tools/call: jsonschema-rs vs jsonschema.

Times Schemas.is_valid and .violations in-process (best of N timeit runs), then the capture
checker over a 10,000-message capture (``presa-trio validate``'s engine); no HTTP, no I/O.
presa_trio validates with jsonschema-rs only; the pure-Python side is PySchemas below, the same
interface on jsonschema (as the product's fallback backend was, and as the tests cross-check).
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import sys
import time
import timeit
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from presa_trio._protocol.schema import Schemas, Violation, load_document

_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class PySchemas:
    """``Schemas.is_valid`` / ``.violations`` on the pure-Python ``jsonschema``: one
    ``Draft202012Validator`` (formats checked) per ``$def``, compiled on first use."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.definitions: dict[str, Any] = document["$defs"]
        self._compiled: dict[str, Any] = {}

    def _get(self, definition: str) -> Any:
        validator = self._compiled.get(definition)
        if validator is None:
            import jsonschema  # here, not at the top: compile_times() times the import

            root = {"$schema": _DIALECT, "$ref": f"#/$defs/{definition}", "$defs": self.definitions}
            checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
            validator = jsonschema.Draft202012Validator(root, format_checker=checker)
            self._compiled[definition] = validator
        return validator

    def is_valid(self, definition: str, instance: object) -> bool:
        return bool(self._get(definition).is_valid(instance))

    def violations(self, definition: str, instance: object) -> list[Violation]:
        validator = self._get(definition)
        if validator.is_valid(instance):
            return []
        return [
            Violation(definition, pointer(e.absolute_path), e.message)
            for e in validator.iter_errors(instance)
        ]


def pointer(path: Iterable[object]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


# backend -> a fresh validator set over the schema document
BACKENDS: dict[str, Callable[[dict[str, Any]], Schemas | PySchemas]] = {
    "jsonschema-rs": Schemas,
    "jsonschema": PySchemas,
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}
TEXT = "This is a simple text response for testing."


def call_request() -> dict[str, Any]:
    params = {"name": "test_simple_text", "arguments": {}, "_meta": META}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def small_result() -> dict[str, Any]:
    return {"resultType": "complete", "content": [{"type": "text", "text": TEXT}]}


def large_result(blocks: int = 200, block_bytes: int = 1024) -> dict[str, Any]:
    text = ("0123456789abcdef" * (block_bytes // 16 + 1))[:block_bytes]
    content: list[dict[str, Any]] = [{"type": "text", "text": text} for _ in range(blocks)]
    png = base64.b64encode(bytes(range(256)) * 16).decode("ascii")  # 4 KiB of "image" bytes
    content.append({"type": "image", "data": png, "mimeType": "image/png"})
    return {"resultType": "complete", "content": content}


def invalid_request() -> dict[str, Any]:
    bad = call_request()
    del bad["params"]["name"]
    return bad


# (label, $def, instance, method): "is_valid" is the hot path, "violations" the full call
CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("request", "CallToolRequest", call_request(), "is_valid"),
    ("request", "CallToolRequest", call_request(), "violations"),
    ("result 1 text", "CallToolResult", small_result(), "is_valid"),
    ("result 1 text", "CallToolResult", small_result(), "violations"),
    ("result 200x1KB+img", "CallToolResult", large_result(), "is_valid"),
    ("result 200x1KB+img", "CallToolResult", large_result(), "violations"),
    ("invalid request", "CallToolRequest", invalid_request(), "violations"),
]


def best_us(fn: Callable[[], object], repeat: int, min_time: float) -> float:
    timer = timeit.Timer(fn)
    number = 1
    while timer.timeit(number) < min_time:
        number *= 2
    return min(timer.repeat(repeat, number)) / number * 1e6


def compile_times(document: dict[str, Any]) -> None:
    for module in ("jsonschema_rs", "jsonschema"):  # import cost is reported apart from compile
        note = " (already imported by presa_trio)" if module in sys.modules else ""
        t0 = time.perf_counter()
        importlib.import_module(module)
        print(f"import {module}: {(time.perf_counter() - t0) * 1e3:.2f} ms{note}")
    print("\nfirst use of a $def (compile + one validation), fresh Schemas per backend, ms")
    print(f"{'def':<18}{'backend':<15}{'first_ms':>10}")
    for backend, make in BACKENDS.items():
        schemas = make(document)
        for name, inst in (("CallToolRequest", call_request()), ("CallToolResult", small_result())):
            t0 = time.perf_counter()
            schemas.is_valid(name, inst)
            print(f"{name:<18}{backend:<15}{(time.perf_counter() - t0) * 1e3:>10.2f}")


def capture_lines(messages: int) -> list[str]:
    """A capture of ``messages`` lines: tools/call requests, each answered, half of them
    with a structured result, as ``presa-trio validate`` reads one."""
    lines = []
    for n in range(messages // 2):
        request = {**call_request(), "id": n}
        result = {"jsonrpc": "2.0", "id": n, "result": small_result()}
        lines += [json.dumps(request), json.dumps(result)]
    return lines


def capture_time(messages: int, repeat: int) -> None:
    """Seconds for ``CaptureChecker`` to check a capture of ``messages`` lines (best of
    ``repeat``, a fresh checker each time, its schemas compiled beforehand)."""
    from presa_trio._protocol.capture import CaptureChecker

    lines = capture_lines(messages)
    best = float("inf")
    for _ in range(repeat):
        checker = CaptureChecker()
        list(checker.check(lines[:2]))  # its tables built, the two $defs compiled
        t0 = time.perf_counter()
        findings = list(checker.check(lines))
        best = min(best, time.perf_counter() - t0)
    print(
        f"\ncapture of {messages} messages (CaptureChecker.check): {best:.3f} s, "
        f"{len(findings)} findings"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="timeit repeats; the best is kept")
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per timeit run (>=)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    document = load_document()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}  python {sys.version.split()[0]}")
    print(f"load_document(): {(time.perf_counter() - t0) * 1e3:.2f} ms\n")
    compile_times(document)

    schemas = {backend: make(document) for backend, make in BACKENDS.items()}
    print("\nper-call time, microseconds (best of --repeat); ratio = jsonschema / jsonschema-rs")
    print(
        f"{'case':<20}{'def':<17}{'bytes':>8}  {'method':<11}"
        f"{'jsonschema-rs':>14}{'jsonschema':>12}{'ratio':>8}"
    )
    failed = False
    for label, name, inst, method in CASES:
        size = len(json.dumps(inst, separators=(",", ":")))
        valid = not label.startswith("invalid")
        us: dict[str, float] = {}
        for backend, s in schemas.items():
            call = getattr(s, method)
            result = call(name, inst)
            ok = result is valid if method == "is_valid" else (result == []) == valid
            if not ok:
                print(f"! {backend} {method}({name}) gave {result!r}", file=sys.stderr)
                failed = True
            us[backend] = best_us(partial(call, name, inst), args.repeat, args.min_time)
        rs, py = us["jsonschema-rs"], us["jsonschema"]
        print(
            f"{label:<20}{name:<17}{size:>8}  {method:<11}{rs:>14.2f}{py:>12.2f}{py / rs:>8.1f}",
            flush=True,
        )
    capture_time(10_000, args.repeat)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
