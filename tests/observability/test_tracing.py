"""OpenTelemetry spans (``Server(tracing=...)``), read back from the SDK's in-memory exporter:
names, kinds, attributes and parents per the semantic conventions for MCP, trace context from
``_meta``, errors, tasks, and that a tracing failure never fails a request."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from presa_trio import Context, InvalidParams, Server, ToolError, serve_stdio
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import Client, RpcError, open_client

ROOT = Path(__file__).resolve().parents[2]
V = "2026-07-28"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
HTTP = {  # the testing client's ASGI scope: HTTP/1.1 from 127.0.0.1:50000
    "network.transport": "tcp",
    "network.protocol.name": "http",
    "network.protocol.version": "1.1",
    "client.address": "127.0.0.1",
    "client.port": 50000,
}


def request_attributes(method: str, request_id: int | str, **more: Any) -> dict[str, Any]:
    return {
        "mcp.method.name": method,
        "jsonrpc.request.id": str(request_id),
        "mcp.protocol.version": V,
        **more,
        **HTTP,
    }


class Spans:
    """A tracer provider whose finished spans are kept in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> ReadableSpan:
        (span,) = [s for s in self.finished() if s.name == name]
        return span


@pytest.fixture
def spans() -> Iterator[Spans]:
    kept = Spans()
    yield kept
    kept.provider.shutdown()


def traced_server(provider: TracerProvider, release: trio.Event | None = None) -> Server:
    server = Server("traced", tracing=provider)
    server.add_extension(TasksExtension())

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        await trio.lowlevel.checkpoint()
        return a + b

    @server.tool()
    def refuse() -> str:
        """A tool's own failure."""
        raise ToolError("no, thanks")

    @server.tool()
    async def broken() -> str:
        """A bug."""
        await trio.lowlevel.checkpoint()
        raise ValueError("bad value")

    @server.tool()
    async def picky(ctx: Context) -> str:
        """A protocol error from inside a tool."""
        await trio.lowlevel.checkpoint()
        raise InvalidParams("not like that")

    @server.tool(options={"tasks": "required"})
    async def slow() -> str:
        """A task that runs until it is cancelled."""
        await trio.sleep(3600)
        return "done"

    @server.tool(options={"tasks": "required"})
    async def held() -> str:
        """A task that finishes when the test releases it."""
        assert release is not None
        await release.wait()
        return "done"

    @server.tool(options={"tasks": "required"})
    async def fails_as_task() -> str:
        """A task that fails."""
        await trio.lowlevel.checkpoint()
        raise InvalidParams("no such thing")

    @server.prompt()
    def greet(name: str) -> str:
        return f"Hello, {name}"

    @server.resource("test://doc", mime_type="text/plain")
    def doc() -> str:
        return "text"

    return server


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def status_of(span: ReadableSpan) -> tuple[StatusCode, str | None]:
    return span.status.status_code, span.status.description


# ---------------------------------------------------------------------- requests


async def test_a_tool_call_is_a_server_span_around_a_tool_span(spans: Spans) -> None:
    async with open_client(traced_server(spans.provider)) as client:
        await client.request(
            "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, request_id=7
        )
    request = spans.named("tools/call add")
    assert request.kind is SpanKind.SERVER
    assert dict(request.attributes or {}) == request_attributes(
        "tools/call", 7, **{"gen_ai.tool.name": "add", "gen_ai.operation.name": "execute_tool"}
    )
    assert status_of(request) == (StatusCode.UNSET, None)
    assert request.parent is None  # no trace context anywhere: a new trace
    tool = spans.named("execute_tool add")
    assert tool.kind is SpanKind.INTERNAL
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
    }
    assert parent_of(tool) == request.context.span_id
    assert tool.context.trace_id == request.context.trace_id
    assert [s.name for s in spans.finished()] == ["execute_tool add", "tools/call add"]


async def test_the_parent_comes_from_meta_trace_context(spans: Spans) -> None:
    meta = {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"}
    async with open_client(traced_server(spans.provider)) as client:
        await client.request("tools/list", meta=meta, request_id="l")
    (span,) = spans.finished()
    assert span.name == "tools/list"
    assert span.context.trace_id == int(TRACE_ID, 16)
    assert span.parent is not None
    assert span.parent.span_id == int(PARENT_ID, 16)
    assert span.parent.is_remote
    assert span.context.trace_state.to_header() == "rojo=00f067aa0ba902b7"
    assert list(span.links) == []
    assert dict(span.attributes or {}) == request_attributes("tools/list", "l")


async def test_an_ambient_context_is_the_parent_or_a_link(spans: Spans) -> None:
    """With trace context in ``_meta`` that is the parent and the ambient span (an HTTP
    server span, say) is linked; without, the ambient span is the parent."""
    tracer = spans.provider.get_tracer("test")
    async with open_client(traced_server(spans.provider)) as client:
        with tracer.start_as_current_span("ambient") as ambient:
            await client.request("tools/list", meta={"traceparent": TRACEPARENT}, request_id=1)
            await client.request("tools/list", request_id=2)
    first, second = (s for s in spans.finished() if s.name == "tools/list")
    assert parent_of(first) == int(PARENT_ID, 16)
    assert [link.context.span_id for link in first.links] == [ambient.get_span_context().span_id]
    assert parent_of(second) == ambient.get_span_context().span_id
    assert list(second.links) == []


async def test_prompt_and_resource_targets(spans: Spans) -> None:
    async with open_client(traced_server(spans.provider)) as client:
        await client.get_prompt("greet", {"name": "Ada"}, request_id=1)
        await client.read_resource("test://doc", request_id=2)
    prompt = spans.named("prompts/get greet")
    assert dict(prompt.attributes or {}) == request_attributes(
        "prompts/get", 1, **{"gen_ai.prompt.name": "greet"}
    )
    # a URI is high-cardinality: an attribute, never part of the span name
    resource = spans.named("resources/read")
    assert dict(resource.attributes or {}) == request_attributes(
        "resources/read", 2, **{"mcp.resource.uri": "test://doc"}
    )


async def test_a_json_rpc_error_is_an_error_span(spans: Spans) -> None:
    async with open_client(traced_server(spans.provider)) as client:
        with pytest.raises(RpcError):
            await client.request("tools/call", {"name": "nope"}, request_id=1)
        with pytest.raises(RpcError):
            await client.request("tools/call", {"name": "picky"}, request_id=2)
    unknown = spans.named("tools/call nope")
    assert dict(unknown.attributes or {}) == request_attributes(
        "tools/call",
        1,
        **{
            "gen_ai.tool.name": "nope",
            "gen_ai.operation.name": "execute_tool",
            "rpc.response.status_code": "-32602",
            "error.type": "-32602",
        },
    )
    assert status_of(unknown) == (StatusCode.ERROR, "Unknown tool: nope")
    request = spans.named("tools/call picky")
    assert request.attributes is not None
    assert (request.attributes["error.type"], request.attributes["rpc.response.status_code"]) == (
        "-32602",
        "-32602",
    )
    tool = spans.named("execute_tool picky")
    assert tool.attributes is not None
    assert tool.attributes["error.type"] == "-32602"
    assert status_of(tool) == (StatusCode.ERROR, "not like that")


async def test_an_unknown_method_is_an_error_span(spans: Spans) -> None:
    async with open_client(traced_server(spans.provider)) as client:
        message = client.message("nope/nope", request_id=3)
        await client.send(message, client.headers_for(message))
    (span,) = spans.finished()
    assert span.name == "_OTHER"  # a client cannot mint span names
    assert span.attributes is not None
    assert span.attributes["mcp.method.name"] == "nope/nope"
    assert span.attributes["error.type"] == "-32601"
    assert status_of(span) == (StatusCode.ERROR, "Method not found: nope/nope")


async def test_a_tool_error_result_is_a_tool_error(spans: Spans) -> None:
    async with open_client(traced_server(spans.provider)) as client:
        result = await client.call_tool("refuse")
    assert result["isError"] is True
    for name in ("tools/call refuse", "execute_tool refuse"):
        span = spans.named(name)
        assert span.attributes is not None
        assert span.attributes["error.type"] == "tool_error"
        assert "rpc.response.status_code" not in span.attributes  # the call itself succeeded
        assert status_of(span) == (StatusCode.ERROR, None)


async def test_a_bug_in_a_tool_is_recorded_on_its_span(spans: Spans) -> None:
    async with open_client(traced_server(spans.provider)) as client:
        with pytest.raises(RpcError):
            await client.call_tool("broken")
    tool = spans.named("execute_tool broken")
    assert tool.attributes is not None
    assert tool.attributes["error.type"] == "ValueError"
    assert status_of(tool) == (StatusCode.ERROR, "bad value")
    assert [e.name for e in tool.events] == ["exception"]
    request = spans.named("tools/call broken")
    assert request.attributes is not None
    assert request.attributes["error.type"] == "-32603"
    assert status_of(request) == (StatusCode.ERROR, "Internal error")


async def test_a_request_cancelled_before_it_answered(spans: Spans) -> None:
    server = Server("cancel", tracing=spans.provider)
    started = trio.Event()

    @server.tool()
    async def wait() -> str:
        started.set()
        await trio.sleep_forever()

    async with open_client(server) as client, client.stream("tools/call", {"name": "wait"}):
        with trio.fail_after(5):
            await started.wait()
    # leaving the stream waited for the request's task: both spans have ended
    request = spans.named("tools/call wait")
    assert request.attributes is not None
    assert request.attributes["error.type"] == "cancelled"  # no answer was ever sent
    assert status_of(request) == (StatusCode.ERROR, None)
    tool = spans.named("execute_tool wait")  # stopped by its owner: not the tool's failure
    assert "error.type" not in (tool.attributes or {})
    assert [e.name for e in tool.events] == ["cancelled"]
    assert status_of(tool) == (StatusCode.UNSET, None)


async def test_stdio_is_a_pipe(spans: Spans) -> None:
    server = traced_server(spans.provider)
    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    server_out, from_server = trio.testing.memory_stream_one_way_pair()
    line = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
    }}}  # fmt: skip
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: serve_stdio(server, stdin=server_in, stdout=server_out))
        await to_server.send_all(json.dumps(line).encode() + b"\n")
        with trio.fail_after(5):
            assert b'"id":1' in await from_server.receive_some()
        await to_server.aclose()
    (span,) = spans.finished()
    assert dict(span.attributes or {}) == {
        "mcp.method.name": "tools/list",
        "jsonrpc.request.id": "1",
        "mcp.protocol.version": V,
        "network.transport": "pipe",
    }


# ---------------------------------------------------------------------- tasks


async def create(client: Client, name: str, arguments: dict[str, Any], request_id: str) -> str:
    message = client.message(
        "tools/call",
        {"name": name, "arguments": arguments},
        capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}},
        meta={"traceparent": TRACEPARENT},
        request_id=request_id,
    )
    response = (await client.send(message)).response
    assert response is not None
    task_id: str = response["result"]["taskId"]
    return task_id


def task_spans(spans: Spans, tool: str) -> tuple[ReadableSpan, ReadableSpan, ReadableSpan]:
    return (
        spans.named(f"tools/call {tool}"),
        spans.named(f"task {tool}"),
        spans.named(f"execute_tool {tool}"),
    )


async def test_a_task_span_is_a_child_of_its_request_and_ends_when_the_task_does(
    spans: Spans,
) -> None:
    release = trio.Event()
    async with open_client(traced_server(spans.provider, release)) as client:
        task_id = await create(client, "held", {}, "c")
        assert [s.name for s in spans.finished()] == ["tools/call held"]  # the task runs on
        release.set()
        with trio.fail_after(5):
            assert (await client.wait_task(task_id))["status"] == "completed"
    request, task, tool = task_spans(spans, "held")
    assert request.context.trace_id == task.context.trace_id == int(TRACE_ID, 16)
    assert parent_of(request) == int(PARENT_ID, 16)
    assert task.kind is SpanKind.INTERNAL
    assert parent_of(task) == request.context.span_id
    assert parent_of(tool) == task.context.span_id
    assert dict(task.attributes or {}) == {
        "mcp.task.id": task_id,
        "gen_ai.tool.name": "held",
        "mcp.task.status": "completed",
    }
    assert status_of(task) == (StatusCode.UNSET, None)
    assert request.end_time is not None and task.end_time is not None
    assert task.end_time > request.end_time  # the task outlived the request that made it
    polls = [s for s in spans.finished() if s.name == "tasks/get"]
    assert polls and all(s.kind is SpanKind.SERVER for s in polls)


async def test_a_task_cancelled_by_its_client_is_not_an_error(spans: Spans) -> None:
    async with open_client(traced_server(spans.provider)) as client:
        task_id = await create(client, "slow", {}, "c")
        await client.cancel_task(task_id)
        with trio.fail_after(5):
            assert (await client.wait_task(task_id))["status"] == "cancelled"
    _, task, tool = task_spans(spans, "slow")
    assert dict(task.attributes or {}) == {
        "mcp.task.id": task_id,
        "gen_ai.tool.name": "slow",
        "mcp.task.status": "cancelled",
    }
    assert status_of(task) == (StatusCode.UNSET, None)
    assert [e.name for e in tool.events] == ["cancelled"]
    assert status_of(tool) == (StatusCode.UNSET, None)


async def test_a_failed_task_is_an_error_span(spans: Spans) -> None:
    async with open_client(traced_server(spans.provider)) as client:
        task_id = await create(client, "fails_as_task", {}, "c")
        with trio.fail_after(5):
            assert (await client.wait_task(task_id))["status"] == "failed"
    _, task, _ = task_spans(spans, "fails_as_task")
    assert dict(task.attributes or {}) == {
        "mcp.task.id": task_id,
        "gen_ai.tool.name": "fails_as_task",
        "mcp.task.status": "failed",
        "error.type": "-32602",
    }
    assert status_of(task) == (StatusCode.ERROR, "no such thing")


async def test_the_answers_a_task_update_ignored_are_named_on_its_span(spans: Spans) -> None:
    """Answers a task was not waiting for are acknowledged with nothing said on the wire;
    the operator finds them on the request's span."""
    release = trio.Event()
    async with open_client(traced_server(spans.provider, release)) as client:
        task_id = await create(client, "held", {}, "c")
        declined = {"action": "decline"}  # well-formed answers, to questions never asked
        ack = await client.update_task(task_id, {"stray": declined, "other": declined})
        assert ack["resultType"] == "complete"
        assert list(ack["_meta"]) == ["io.modelcontextprotocol/serverInfo"]
        release.set()
        with trio.fail_after(5):
            assert (await client.wait_task(task_id))["status"] == "completed"
        await client.update_task(task_id, {"late": declined})  # the task has ended
    updates = [s for s in spans.finished() if s.name == "tasks/update"]
    assert [dict(s.attributes or {}).get("mcp.task.ignored_input_keys") for s in updates] == [
        ("other", "stray"),
        ("late",),
    ]
    assert all(status_of(s) == (StatusCode.UNSET, None) for s in updates)  # not errors
    polls = [s for s in spans.finished() if s.name == "tasks/get"]
    assert not any("mcp.task.ignored_input_keys" in (s.attributes or {}) for s in polls)


# ---------------------------------------------------------------------- failures and cost


class Broken(SpanProcessor):
    """A span processor that fails at every turn."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("broken processor")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("broken processor")


async def test_a_tracing_failure_never_fails_a_request(caplog: pytest.LogCaptureFixture) -> None:
    provider = TracerProvider()
    provider.add_span_processor(Broken())
    release = trio.Event()
    release.set()
    server = traced_server(provider, release)
    with caplog.at_level(logging.WARNING, logger="presa_trio"):
        async with open_client(server) as client:
            for _ in range(2):
                result = await client.call_tool("add", {"a": 1, "b": 2})
                assert result["content"] == [{"type": "text", "text": "3"}]
            task_id = await client.create_task("held")
            with trio.fail_after(5):
                assert (await client.wait_task(task_id))["status"] == "completed"
    warnings = [r for r in caplog.records if "tracing failed" in r.getMessage()]
    assert len(warnings) == 1  # once, not once per span


def test_tracing_needs_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ImportError, match=r"presa_trio\[otel\]"):
        Server("no-api", tracing=True)


def test_tracing_takes_a_provider_or_a_flag() -> None:
    assert Server("off").settings.tracing is None
    assert Server("global", tracing=True).settings.tracing is not None
    with pytest.raises(TypeError, match="TracerProvider"):
        Server("wrong", tracing="yes")  # type: ignore[arg-type]


OFF = """
import sys
import trio
from presa_trio import Server
from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import open_client

server = Server("untraced")
server.add_extension(TasksExtension())

@server.tool()
async def add(a: int, b: int) -> int:
    await trio.lowlevel.checkpoint()
    return a + b

@server.tool(options={"tasks": "required"})
async def later() -> str:
    await trio.lowlevel.checkpoint()
    return "done"

async def main() -> None:
    async with open_client(server) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
        await client.list_tools()
        task_id = await client.create_task("later")
        await client.wait_task(task_id)

trio.run(main)
print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
"""


def test_with_tracing_off_opentelemetry_is_never_imported() -> None:
    """Off means free: serving requests and a task imports no opentelemetry module."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(OFF)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_readme_example_runs() -> None:
    """The observability guide's example (docs/guides/observability.md), run as it is: it
    prints both spans, in the caller's trace."""
    text = (ROOT / "docs" / "guides" / "observability.md").read_text()
    found = re.search(r"```python\n(# traced example: observability\n.*?)```", text, re.DOTALL)
    assert found is not None, "docs/guides/observability.md lost its observability example"
    done = subprocess.run(
        [sys.executable, "-c", found.group(1)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    names = re.findall(r'"name": "([^"]+)"', done.stdout)
    assert [n for n in names if " forecast" in n] == [
        "execute_tool forecast",
        "tools/call forecast",
    ]
    assert done.stdout.count(f'"trace_id": "0x{TRACE_ID}"') == 2


async def test_an_initialize_session_is_traced_too(spans: Spans) -> None:
    from presa_trio.testing import open_session

    async with open_session(traced_server(spans.provider)) as session:
        assert (await session.call_tool("add", {"a": 2, "b": 3}))["structuredContent"] == {
            "result": 5
        }
    names = [s.name for s in spans.finished()]
    assert names.count("initialize") == 1
    call = spans.named("tools/call add")
    assert call.kind == SpanKind.SERVER
    assert call.attributes is not None
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert call.attributes["gen_ai.tool.name"] == "add"
