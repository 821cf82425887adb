"""Drive a presa_trio server's tasks with today's Python clients: the official MCP Python SDK
client (``mcp``) with the fastmcp-tasks client extension, and FastMCP's client with its
``call_tool_task`` handle.

Run as a script in its own interpreter (asyncio), like ``sdk_client.py``:
``python tasks_client.py URL``. It prints one JSON object: what each step returned, or the
JSON-RPC error it ended with. ``python tasks_client.py --traced fastmcp|sdk URL`` runs one
task inside a span of its own, with an OpenTelemetry SDK configured, and prints the client's
spans: FastMCP's client and the official one put the trace context in each request's
``_meta``.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types
from fastmcp import Client as FastMCPClient
from fastmcp_tasks import call_tool_task
from fastmcp_tasks.client import TasksClientExtension
from mcp import Client
from mcp.shared.exceptions import MCPError

WIRE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "wire.md"


def readme_client(url: str) -> Client:
    """The official client as the wire reference (docs/reference/wire.md, "Which clients
    connect") makes it: its expression, evaluated as written."""
    pattern = r"`(Client\(url, extensions=\[TasksClientExtension\(elicit\)\][^`]*)`"
    found = re.search(pattern, WIRE.read_text())
    assert found is not None, "docs/reference/wire.md lost its mcp Client(...) expression"
    names = {"Client": Client, "TasksClientExtension": TasksClientExtension}
    client: Client = eval(found.group(1), {**names, "elicit": elicit, "url": url})
    return client


async def elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
    """The user, answering the task's question."""
    return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})


def rpc_error(exc: BaseException) -> MCPError | None:
    """The JSON-RPC error inside ``exc`` (the SDK raises it from inside task groups)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc
    if exc.__cause__ is not None:
        return rpc_error(exc.__cause__)
    return None


async def step(run: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    try:
        return {"ok": await run()}
    except BaseException as exc:
        error = rpc_error(exc)
        if error is None:
            return {"raised": f"{type(exc).__name__}: {exc}"}
        return {"error": {"code": error.code, "message": error.message}}


async def with_sdk(url: str) -> dict[str, Any]:
    """Tasks driven transparently: ``call_tool`` polls ``tasks/get`` until the result, and
    a task that parks for input is answered through the elicitation callback (``tasks/update``).
    The client is the wire reference's; without ``elicitation_callback=`` the question is
    refused."""
    seen: dict[str, Any] = {}
    async with readme_client(url) as c:
        seen["protocol_version"] = c.protocol_version

        async def add() -> Any:
            result = await c.call_tool("slow_add", {"a": 2, "b": 3})
            return [block.model_dump(exclude_none=True) for block in result.content]

        async def ask() -> Any:
            result = await c.call_tool("ask_name", {})
            return [block.model_dump(exclude_none=True) for block in result.content]

        seen["slow_add"] = await step(add)
        seen["ask_name"] = await step(ask)
    async with Client(url, extensions=[TasksClientExtension(elicit)]) as without_callback:

        async def refused() -> Any:
            result = await without_callback.call_tool("ask_name", {})
            content = [block.model_dump(exclude_none=True) for block in result.content]
            return {"is_error": result.is_error, "content": content}

        seen["ask_name_without_callback"] = await step(refused)
    return seen


async def with_handle(url: str) -> dict[str, Any]:
    """Tasks driven by hand through fastmcp-tasks' ``ToolTask``: status, wait, cancel."""
    seen: dict[str, Any] = {}
    async with FastMCPClient(url) as client:

        async def add() -> Any:
            task = await call_tool_task(client, "slow_add", {"a": 20, "b": 22})
            result = await task.result()
            return [block.model_dump(exclude_none=True) for block in result.content]

        async def cancel() -> Any:
            task = await call_tool_task(client, "forever", {})
            working = (await task.wait(state="working", timeout=10)).status
            polled = (await task.status()).status
            await task.cancel()
            final = await task.wait(timeout=10)
            return {"before": working, "status": polled, "after": final.status}

        seen["slow_add"] = await step(add)
        seen["cancel"] = await step(cancel)
    return seen


async def traced(url: str, which: str) -> dict[str, Any]:
    """One task followed to its result inside a client span, by FastMCP's client with its
    handle (``which="fastmcp"``) or by the wire reference's official client (``"sdk"``); the
    client's spans."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    agent = trace.get_tracer("tasks-client").start_as_current_span
    if which == "sdk":
        async with readme_client(url) as sdk:
            with agent("agent"):
                result: Any = await sdk.call_tool("slow_add", {"a": 1, "b": 1})
    else:
        async with FastMCPClient(url) as client:
            with agent("agent"):
                task = await call_tool_task(client, "slow_add", {"a": 1, "b": 1})
                result = await task.result()
    return {
        "content": [block.model_dump(exclude_none=True) for block in result.content],
        "spans": [
            {
                "name": span.name,
                "trace_id": f"{span.context.trace_id:032x}",
                "span_id": f"{span.context.span_id:016x}",
            }
            for span in exporter.get_finished_spans()
        ],
    }


async def main(url: str) -> dict[str, Any]:
    return {"sdk": await with_sdk(url), "handle": await with_handle(url)}


if __name__ == "__main__":
    if sys.argv[1] == "--traced":  # --traced fastmcp|sdk URL
        print(json.dumps(asyncio.run(traced(sys.argv[3], sys.argv[2]))))
    else:
        print(json.dumps(asyncio.run(main(sys.argv[1]))))
