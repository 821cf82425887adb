"""The server the fastmcp-tasks end-to-end test runs under a real hypercorn trio worker.

``PRESA_TASKS_STRICT=1`` serves the Tasks extension with its strict default (``tasks/*``
without ``Mcp-Name`` refused, -32020); otherwise with ``require_name_header=False``, as
today's Python clients need. With ``PRESA_WIRE_LOG=PATH`` every exchange is appended to PATH
as one JSON line (the method, whether ``Mcp-Name`` was sent, the HTTP status, the answer):
the test's wire capture. With ``PRESA_SPANS=PATH`` the server traces (``Server(tracing=...)``)
and every finished span is appended to PATH as one JSON line.
"""

from __future__ import annotations

import json
import os
from typing import Any

import trio

from presa_trio import Context, Server, Validation
from presa_trio.ext.tasks import TasksExtension


def tracer_provider(path: str) -> Any:
    """An SDK tracer provider writing each finished span to ``path`` as a JSON line."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    out = open(path, "a")  # noqa: SIM115 (open for the life of the process)
    exporter = ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + "\n")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


strict = os.environ.get("PRESA_TASKS_STRICT") == "1"
spans = os.environ.get("PRESA_SPANS")
tracing = tracer_provider(spans) if spans else False
server = Server("tasks-e2e", "1.0", validation=Validation(outbound=True), tracing=tracing)
server.add_extension(TasksExtension(require_name_header=strict))
NAME_FORM = {
    "mode": "form",
    "message": "Your name?",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}


@server.tool(options={"tasks": "required"})
async def slow_add(a: int, b: int) -> int:
    """Add, slowly enough to be polled."""
    await trio.sleep(0.3)
    return a + b


@server.tool(options={"tasks": "required"})
async def ask_name(ctx: Context) -> str:
    """Park until the client says its name."""
    answers = await ctx.input({"name": {"method": "elicitation/create", "params": NAME_FORM}})
    return "Hello, " + answers["name"]["content"]["name"]


@server.tool(options={"tasks": "required"})
async def forever() -> str:
    """Run until cancelled."""
    await trio.sleep(3600)
    return "never"


served = server.asgi_app()
WIRE_LOG = os.environ.get("PRESA_WIRE_LOG")


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The server's app, with every HTTP exchange written to ``WIRE_LOG`` when set."""
    if scope["type"] != "http" or WIRE_LOG is None:
        await served(scope, receive, send)
        return
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    seen: dict[str, Any] = {
        "method": headers.get("mcp-method"),
        "mcp_name": headers.get("mcp-name"),
        "status": None,
    }
    body = bytearray()

    async def capture(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            seen["status"] = message["status"]
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))
        await send(message)

    try:
        await served(scope, receive, capture)
    finally:
        text = body.decode(errors="replace")
        lines = [line[5:] for line in text.splitlines() if line.startswith("data:")]
        seen["answer"] = json.loads(lines[-1] if lines else text) if text.strip() else None
        async with await trio.open_file(WIRE_LOG, "a") as log:
            await log.write(json.dumps(seen) + "\n")
