"""Middleware wraps every admitted request of a server: in order (the first added the
outermost), with the request's method, params and principal, seeing its result or its error;
in both eras and over HTTP and stdio; an ``McpError`` it raises is answered as it is, anything
else as a handler's crash. A server without middleware builds no chain."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio import Context, Server, Validation, serve_stdio
from presa_trio.errors import InvalidParams, ServiceUnavailable
from presa_trio.ext.tasks import TasksExtension
from presa_trio.middleware import Next
from presa_trio.mrtr import elicit
from presa_trio.testing import RpcError, open_client, open_session

Seen = list[tuple[str, str, Any]]


def recorder(label: str, seen: Seen) -> Any:
    """A middleware that notes what it saw going in and coming out."""

    async def record(ctx: Context, call_next: Next) -> dict[str, Any]:
        seen.append((label, "in", (ctx.method, ctx.params.get("name"), ctx.principal)))
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            seen.append((label, "raised", type(exc).__name__))
            raise
        seen.append((label, "out", result.get("resultType", "complete")))
        return result

    return record


def build(**options: Any) -> Server:
    server = Server("wrapped", principal=lambda ctx: "alice", **options)

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    async def broken() -> str:
        raise KeyError("a bug")

    @server.tool()
    async def refuse() -> str:
        raise InvalidParams("Nope", {"why": "refused"})

    @server.tool()
    async def confirm(ctx: Context) -> str:
        answers = await ctx.input({"ok": elicit("Sure?", {"ok": {"type": "boolean"}})})
        return "yes" if answers["ok"]["content"]["ok"] else "no"

    return server


async def test_the_first_added_is_the_outermost_and_each_sees_method_params_and_principal() -> None:
    seen: Seen = []
    server = build()
    server.add_middleware(recorder("outer", seen))
    server.add_middleware(recorder("inner", seen))
    async with open_client(server) as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert result["content"] == [{"type": "text", "text": "hi"}]
    assert seen == [
        ("outer", "in", ("tools/call", "echo", "alice")),
        ("inner", "in", ("tools/call", "echo", "alice")),
        ("inner", "out", "complete"),
        ("outer", "out", "complete"),
    ]
    assert server.middleware[0] is not server.middleware[1]


async def test_an_error_passes_through_each_middleware_on_its_way_out() -> None:
    seen: Seen = []
    server = build()
    server.add_middleware(recorder("outer", seen))
    server.add_middleware(recorder("inner", seen))
    async with open_client(server) as client:
        with pytest.raises(RpcError) as refused:
            await client.call_tool("refuse")
    assert (refused.value.code, refused.value.data, refused.value.status) == (
        -32602,
        {"why": "refused"},
        400,
    )
    assert [s for s in seen if s[1] == "raised"] == [
        ("inner", "raised", "InvalidParams"),
        ("outer", "raised", "InvalidParams"),
    ]


async def test_a_middleware_can_answer_instead_of_the_method() -> None:
    async def cached(ctx: Context, call_next: Next) -> dict[str, Any]:
        if ctx.method == "tools/call" and ctx.params["name"] == "echo":
            await trio.lowlevel.checkpoint()
            return {"content": [{"type": "text", "text": "from the cache"}]}
        return await call_next(ctx)

    server = build(validation=Validation(outbound=True))
    server.add_middleware(cached)
    async with open_client(server) as client:
        result = await client.call_tool("echo", {"text": "hi"})
        listed = await client.list_tools()
    # stamped on its way out as every result is: resultType and serverInfo
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "wrapped"
    assert result["content"][0]["text"] == "from the cache"
    assert len(listed) == 4


async def test_a_middleware_raising_an_mcp_error_answers_it() -> None:
    calls = 0

    async def closed(ctx: Context, call_next: Next) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        await trio.lowlevel.checkpoint()
        raise ServiceUnavailable("Closed for maintenance")

    server = build()
    server.add_middleware(closed)
    async with open_client(server) as client:
        with pytest.raises(RpcError) as refused:
            await client.call_tool("echo", {"text": "hi"})
    assert (refused.value.code, refused.value.status, refused.value.data) == (
        -32603,
        503,
        {"retryable": True},
    )
    assert refused.value.message == "Closed for maintenance"
    assert calls == 1


async def test_a_middleware_that_crashes_is_answered_as_a_crashed_handler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def buggy(ctx: Context, call_next: Next) -> dict[str, Any]:
        await call_next(ctx)
        raise ZeroDivisionError("oops")

    server = build()
    server.add_middleware(buggy)
    async with open_client(server) as client:
        with caplog.at_level(logging.ERROR, "presa_trio"):
            with pytest.raises(RpcError) as crashed:
                await client.call_tool("echo", {"text": "hi"})
            with pytest.raises(RpcError) as handler_crash:
                await client.call_tool("broken")
    for error in (crashed.value, handler_crash.value):
        assert (error.code, error.message, error.data, error.status) == (
            -32603,
            "Internal error",
            None,
            500,
        )
    assert "ZeroDivisionError" in caplog.text and "KeyError" in caplog.text


async def test_a_middleware_that_returns_no_result_is_a_server_fault(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def forgetful(ctx: Context, call_next: Next) -> Any:
        await call_next(ctx)  # and no return

    server = build()
    server.add_middleware(forgetful)
    async with open_client(server) as client:
        with caplog.at_level(logging.ERROR, "presa_trio"), pytest.raises(RpcError) as refused:
            await client.call_tool("echo", {"text": "hi"})
    assert (refused.value.code, refused.value.status) == (-32603, 500)
    assert "returned <class 'NoneType'>, not a result object" in caplog.text


async def test_an_input_round_is_a_result_to_middleware_and_each_round_a_request() -> None:
    seen: Seen = []
    server = build()
    server.add_middleware(recorder("only", seen))
    async with open_client(server) as client:
        result = await client.call_tool(
            "confirm", answer=lambda key, request: {"action": "accept", "content": {"ok": True}}
        )
    assert result["content"][0]["text"] == "yes"
    assert [s[2] for s in seen if s[1] == "out"] == ["input_required", "complete"]
    assert [s[1] for s in seen] == ["in", "out", "in", "out"]


async def test_a_round_sees_its_verified_state_before_it_runs() -> None:
    rounds: list[int] = []

    async def note(ctx: Context, call_next: Next) -> dict[str, Any]:
        rounds.append(ctx.round)
        return await call_next(ctx)

    server = build()
    server.add_middleware(note)
    async with open_client(server) as client:
        await client.call_tool(
            "confirm", answer=lambda key, request: {"action": "accept", "content": {"ok": False}}
        )
    assert rounds == [0, 1]


async def test_a_task_augmented_call_shows_its_creation_and_each_tasks_request() -> None:
    seen: Seen = []
    server = build()
    server.add_extension(TasksExtension())

    @server.tool(options={"tasks": "required"})
    async def slow() -> str:
        await trio.sleep(0.01)
        return "done"

    server.add_middleware(recorder("only", seen))
    async with open_client(server) as client:
        task_id = await client.create_task("slow")
        task = await client.wait_task(task_id)
    assert task["status"] == "completed"
    assert seen[:2] == [
        ("only", "in", ("tools/call", "slow", "alice")),
        ("only", "out", "task"),
    ]
    assert {s[2][0] for s in seen[2:] if s[1] == "in"} == {"tasks/get"}


async def test_requests_refused_at_admission_do_not_reach_middleware() -> None:
    seen: Seen = []
    server = build()
    server.add_middleware(recorder("only", seen))
    async with open_client(server, validate=False) as client:
        with pytest.raises(RpcError) as unknown:
            await client.request("nothing/here")
        with pytest.raises(RpcError) as invalid:
            await client.request("tools/call", {"name": "echo", "arguments": [1]})
    assert (unknown.value.code, invalid.value.code) == (-32601, -32602)
    assert seen == []


async def test_every_request_of_an_older_era_session_goes_through_it_initialize_too() -> None:
    seen: Seen = []
    server = build()
    server.add_middleware(recorder("only", seen))
    async with open_session(server) as session:
        called = await session.call_tool("echo", {"text": "old"})
        assert await session.request("ping") == {}
        with pytest.raises(RpcError) as refused:
            await session.call_tool("refuse")
        await session.notify("notifications/progress", {"progressToken": 1, "progress": 1})
    assert called["content"] == [{"type": "text", "text": "old"}]
    assert "resultType" not in called  # still written down to the session's version
    assert refused.value.code == -32602
    assert [s[2] for s in seen if s[1] == "in"] == [
        ("initialize", None, "alice"),
        ("tools/call", "echo", "alice"),
        ("ping", None, "alice"),
        ("tools/call", "refuse", "alice"),
    ]
    assert [s[2] for s in seen if s[1] != "in"] == [
        "complete",
        "complete",
        "complete",
        "InvalidParams",
    ]


async def test_a_cancelled_session_request_is_an_error_to_middleware() -> None:
    seen: Seen = []
    started = trio.Event()
    server = build()

    @server.tool()
    async def wait() -> str:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("not reached")

    server.add_middleware(recorder("only", seen))
    async with open_session(server) as session, trio.open_nursery() as nursery:

        async def call() -> None:
            with pytest.raises(RpcError) as cancelled:
                await session.call_tool("wait")
            assert cancelled.value.code == -32800

        nursery.start_soon(call)
        await started.wait()
        await session.notify("notifications/cancelled", {"requestId": session._next_id})
    assert seen[-1] == ("only", "raised", "RequestCancelled")


async def test_requests_on_stdio_go_through_it_in_both_eras() -> None:
    seen: Seen = []
    server = build()
    server.add_middleware(recorder("only", seen))
    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    server_out, from_server = trio.testing.memory_stream_one_way_pair()
    modern = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "echo", "arguments": {"text": "a"}, "_meta": modern}},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "echo", "arguments": {"text": "b"}}},
    ]  # fmt: skip
    received = b""
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: serve_stdio(server, stdin=server_in, stdout=server_out))
            for line in lines:
                await to_server.send_all(json.dumps(line).encode() + b"\n")
                while received.count(b"\n") < line["id"]:
                    received += await from_server.receive_some(65536)
            await to_server.aclose()
    answers = [json.loads(line) for line in received.splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert all("result" in a for a in answers)
    assert [s[2] for s in seen if s[1] == "in"] == [
        ("tools/call", "echo", "alice"),
        ("initialize", None, "alice"),
        ("tools/call", "echo", "alice"),
    ]


def test_middleware_is_added_before_the_server_is_served() -> None:
    server = build()
    server.asgi_app()
    with pytest.raises(RuntimeError, match="add middleware before"):
        server.add_middleware(recorder("late", []))


async def test_a_server_without_middleware_builds_no_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from presa_trio._kernel import dispatcher, legacy

    def never(*args: object) -> None:
        raise AssertionError("a chain was built")

    monkeypatch.setattr(dispatcher, "run_chain", never)
    monkeypatch.setattr(legacy, "run_chain", never)
    async with open_client(build()) as client:
        result = await client.call_tool("echo", {"text": "plain"})
    async with open_session(build()) as session:
        old = await session.call_tool("echo", {"text": "plain"})
    assert result["content"][0]["text"] == old["content"][0]["text"] == "plain"
