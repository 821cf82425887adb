"""What middleware costs a request: in-process ``tools/call`` of the fixture's
``test_simple_text`` through the ASGI app (``asgi_profile.drive``), with no middleware, one
that does nothing (``return await call_next(ctx)``) and ``RequestLog`` + ``RateLimit``
(logging off), the servers in turn, best of ``--runs``; and the same in Python opcodes per
request (deterministic, ``--opcodes``)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.asgi_profile import drive, opcodes
from bench.http_bench import request_body
from fixtures.conformance import build_server
from presa_trio import Context, Validation
from presa_trio.middleware import Next, RateLimit, RequestLog


async def nothing(ctx: Context, call_next: Next) -> dict[str, Any]:
    return await call_next(ctx)


def app(kind: str) -> Any:
    server = build_server(validation=Validation(outbound=False), loop_warning=None)
    if kind == "one no-op":
        server.add_middleware(nothing)
    elif kind == "log + limit":
        server.add_middleware(RequestLog(level=logging.DEBUG))  # formatted by no handler
        server.add_middleware(RateLimit(per_second=1e9))
    return server.asgi_app()


KINDS = ("none", "one no-op", "log + limit")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5000, help="requests per run (default 5000)")
    ap.add_argument("--runs", type=int, default=8, help="runs per server, in turn (default 8)")
    ap.add_argument("--opcodes", action="store_true", help="also count opcodes per request")
    args = ap.parse_args()
    body = request_body("test_simple_text").encode()
    apps = {kind: app(kind) for kind in KINDS}
    for served in apps.values():
        trio.run(drive, served, 500, body)  # warm-up
    best = dict.fromkeys(KINDS, float("inf"))
    for _ in range(args.runs):
        for kind, served in apps.items():
            best[kind] = min(best[kind], trio.run(drive, served, args.n, body))
    us = {kind: seconds / args.n * 1e6 for kind, seconds in best.items()}
    print(f"in-process tools/call, {args.n} a run, best of {args.runs}, us/request")
    for kind in KINDS:
        extra = us[kind] - us["none"]
        print(f"  {kind:<12}{us[kind]:>8.1f}  ({extra:+.1f} us, {us[kind] / us['none']:.3f}x)")
    if args.opcodes:
        print("Python opcodes per request")
        for kind in KINDS:
            count, _ = opcodes(app(kind), body)
            print(f"  {kind:<12}{count:>8,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
