"""In-process cost of one tools/call through the ASGI apps, called directly (optionally cProfiled).

No sockets, no hypercorn, no concurrency: trio scheduler passes are not amortized as under load."""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import raw_app
from bench.http_bench import PROTO, ROOT, request_body
from fixtures.conformance import build_server

HEADERS = [
    (b"host", b"127.0.0.1:3200"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", PROTO.encode()),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"test_simple_text"),
]


def scope_for(body: bytes) -> dict[str, Any]:
    headers = [*HEADERS, (b"content-length", str(len(body)).encode())]
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
            "root_path": "", "headers": headers, "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 3200)}  # fmt: skip


class Exchange:
    """One request as hypercorn presents it: the body, then http.disconnect once answered."""

    def __init__(self, body: bytes) -> None:
        self.body: bytes | None = body
        self.sent: list[dict[str, Any]] = []
        self.answered = trio.Event()

    async def receive(self) -> dict[str, Any]:
        if self.body is not None:
            body, self.body = self.body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.answered.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            self.answered.set()


async def drive(app: Any, n: int, body: bytes) -> float:
    """Run lifespan startup, n sequential requests (timed), then shutdown; return seconds."""
    to_app, from_test = trio.open_memory_channel[dict[str, Any]](1)

    async def life_send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    started = trio.Event()
    scope = scope_for(body)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}},
                           from_test.receive, life_send)  # fmt: skip
        await to_app.send({"type": "lifespan.startup"})
        await started.wait()
        t0 = time.perf_counter()
        for _ in range(n):
            exchange = Exchange(body)
            await app(scope, exchange.receive, exchange.send)
            sent = exchange.sent
            if sent[0].get("status") != 200 or b'"result"' not in sent[-1]["body"]:
                raise RuntimeError(f"bad response: {sent}")
        elapsed = time.perf_counter() - t0
        await to_app.send({"type": "lifespan.shutdown"})
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20000, help="requests per app (default 20000)")
    ap.add_argument("--profile", action="store_true", help="cProfile presa (outbound on)")
    ap.add_argument("--top", type=int, default=15, help="rows of the profile (by self time)")
    args = ap.parse_args()
    body = request_body("test_simple_text").encode()
    apps = {
        "presa-out-on": build_server(validate_outbound=True).asgi_app(),
        "presa-out-off": build_server(validate_outbound=False).asgi_app(),
        "raw": raw_app.app,
    }
    print(f"in-process ASGI, {args.n} sequential requests each (best of 3), us/request")
    for label, app in apps.items():
        trio.run(drive, app, 500, body)  # warm-up: compile validators, fill caches
        best = min(trio.run(drive, app, args.n, body) for _ in range(3))
        print(f"{label:<15}{best / args.n * 1e6:>9.1f}", flush=True)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        trio.run(drive, apps["presa-out-on"], args.n, body)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).sort_stats("tottime")
        stats.print_stats(args.top)
        # sys.prefix first: the venv may live inside the repository (ROOT/.venv)
        print(out.getvalue().replace(sys.prefix, "<venv>").replace(str(ROOT) + "/", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
