"""A minimal raw ASGI 3 app answering every POST with a fixed tools/call JSON-RPC result.

Baseline for bench/http_bench.py only: no framework, no parsing, no validation, no routing.
"""

from __future__ import annotations

from typing import Any

BODY = (
    b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":'
    b'[{"type":"text","text":"This is a simple text response for testing."}]}}'
)
HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(BODY)).encode("ascii")),
]


async def lifespan(receive: Any, send: Any) -> None:
    """The lifespan protocol with nothing to start or stop (``folded_app.py`` uses it too)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    # Read the request body fully (as a real server must) before answering.
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
