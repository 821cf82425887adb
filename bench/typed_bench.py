"""Typed arguments and results in process: one `tools/call` whose tool takes and returns rows,
typed (a list of dataclasses in, the same out, with its ``structuredContent``) beside the same
rows untyped (a plain list of dicts in, a dict out), through the ASGI app.

What the typed tool pays beyond the untyped one is presa's conversion both ways (pydantic's
lax mode in, ``to_jsonable`` out) and the output schema's check. Not measured: HTTP.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import asgi_profile
from bench.http_bench import PROTO
from presa_trio import Server


@dataclass
class Row:
    id: int
    name: str
    tags: list[str]
    note: str | None = None


def build() -> Server:
    server = Server("typed-bench", "1", loop_warning=None)

    @server.tool(thread=False)
    def typed(rows: list[Row]) -> list[Row]:
        """Hands the rows back."""
        return rows

    @server.tool(thread=False)
    def untyped(rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Hands the rows back."""
        return {"rows": rows}

    return server


def body(tool: str, count: int) -> bytes:
    rows = [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(count)]
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTO,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }
    params = {"name": tool, "arguments": {"rows": rows}, "_meta": meta}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(message, separators=(",", ":")).encode()


async def one(app: Any, data: bytes, tool: str) -> dict[str, Any]:
    """One request through the app; its answer, checked."""
    scope = asgi_profile.scope_for(data, tool)
    exchange = asgi_profile.Exchange(data)
    async with app.lifespan():
        await app(scope, exchange.receive, exchange.send)
    answer: dict[str, Any] = json.loads(exchange.sent[-1]["body"])
    result: dict[str, Any] = answer["result"]
    assert not result.get("isError"), answer
    rows = json.loads(data)["params"]["arguments"]["rows"]
    if tool == "typed":  # each row a Row, written back with its default note
        assert result["structuredContent"] == {"result": [{**r, "note": None} for r in rows]}
    else:  # a dict is plain content
        assert json.loads(result["content"][0]["text"]) == {"rows": rows}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200, help="rows per call (200)")
    parser.add_argument("-n", type=int, default=200, help="requests per run (200)")
    parser.add_argument("--runs", type=int, default=5, help="runs per tool, in turn (5)")
    args = parser.parse_args()
    app = build().asgi_app()
    bodies = {tool: body(tool, args.rows) for tool in ("untyped", "typed")}
    for tool, data in bodies.items():
        trio.run(one, app, data, tool)
    best = dict.fromkeys(bodies, float("inf"))
    for _ in range(args.runs):
        for tool, data in bodies.items():
            seconds = trio.run(asgi_profile.drive, app, args.n, data, None, None, tool)
            best[tool] = min(best[tool], seconds)
    us = {tool: seconds / args.n * 1e6 for tool, seconds in best.items()}
    print(f"tools/call of {args.rows} rows in process, best of {args.runs} runs of {args.n}")
    for tool, cost in us.items():
        print(f"  {tool:<8} {cost:>9,.1f} us/request  ({len(bodies[tool]):,} B body)")
    print(f"  typed / untyped: {us['typed'] / us['untyped']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
