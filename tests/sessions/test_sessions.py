"""The older era over HTTP, in process: ``initialize`` opens a session, its requests are served
by the same handlers as 2026-07-28 ones and written down to its version, a tool's ``ctx.input``
is a request pushed to the client, and the session's GET stream, DELETE and errors behave as
the 2025-06-18 and 2025-11-25 transports say."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from support.sessions_app import build

from presa_trio import Sessions
from presa_trio.testing import (
    Client,
    RpcError,
    SessionClient,
    drive,
    open_client,
    open_session,
)

JSON = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]


def initialize(version: object, request_id: int = 1) -> str:
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
    )


def on(
    session: SessionClient, method: str, params: dict[str, Any] | None = None, request_id: Any = 7
) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message)


@pytest.fixture
async def session() -> AsyncIterator[SessionClient]:
    async with open_session(build(), answer=say_ada) as opened:
        yield opened


def say_ada(key: str, request: dict[str, Any]) -> dict[str, Any]:
    if request["method"] == "elicitation/create":
        return {"action": "accept", "content": {"name": "Ada"}}
    if request["method"] == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "42"}, "model": "m"}
    return {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}


# ---------------------------------------------------------------------------- opening


@pytest.mark.parametrize(
    ("asked", "given"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2026-07-28", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
        ("not-a-version", "2025-11-25"),
    ],
)
async def test_initialize_negotiates_an_older_version(asked: str, given: str) -> None:
    app = build().asgi_app()
    async with app.lifespan():
        result = await drive(app, initialize(asked), JSON)
    assert result.status == 200
    answer = result.messages[0]["result"]
    assert answer["protocolVersion"] == given
    assert answer["serverInfo"] == {"name": "sessions", "version": "1"}
    assert answer["capabilities"] == {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "logging": {},
    }
    assert "resultType" not in answer and "_meta" not in answer
    session_id = result.headers["mcp-session-id"]
    assert len(session_id) == 32 and all(0x21 <= ord(c) <= 0x7E for c in session_id)


async def test_every_initialize_opens_its_own_session() -> None:
    app = build().asgi_app()
    async with app.lifespan():
        ids = {
            (await drive(app, initialize("2025-11-25"), JSON)).headers["mcp-session-id"]
            for _ in range(20)
        }
    assert len(ids) == 20


async def test_initialize_with_bad_params_is_refused_and_opens_nothing() -> None:
    app = build().asgi_app()
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25"},
        }
    )
    async with app.lifespan():
        result = await drive(app, body, JSON)
    assert result.status == 400
    assert result.messages[0]["error"]["code"] == -32602
    assert "mcp-session-id" not in result.headers


async def test_initialize_repeated_on_a_session_is_refused(session: SessionClient) -> None:
    result = await drive(session.app, initialize("2025-11-25", 9), session.headers())
    assert result.status == 200
    assert result.messages[0] == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {
            "code": -32600,
            "message": "Invalid request: this session is already initialized",
        },
    }


# ---------------------------------------------------------------------------- requests


async def test_results_are_written_for_the_older_version(session: SessionClient) -> None:
    tools = await session.request("tools/list", {})
    assert set(tools) == {"tools"}
    assert [t["name"] for t in tools["tools"]] == [
        "ask_model",
        "chatty",
        "greet",
        "relay",
        "roots",
        "sleeper",
        "touch",
        "whoami",
    ]
    result = await session.call_tool("whoami", {})
    pid = result["structuredContent"]["result"]
    assert result == {
        "content": [{"type": "text", "text": str(pid)}],
        "structuredContent": {"result": pid},
    }
    assert await session.request("ping") == {}
    assert await session.request("logging/setLevel", {"level": "error"}) == {}


async def test_a_missing_resource_is_the_older_code_on_http_200(session: SessionClient) -> None:
    with pytest.raises(RpcError) as refused:  # on its resumable stream (2025-11-25)
        await session.read_resource("test://nothing")
    error = refused.value
    assert (error.status, error.code, error.message, error.data) == (
        200,
        -32002,
        "Resource not found",
        {"uri": "test://nothing"},
    )


async def test_errors_on_a_session_are_http_200(session: SessionClient) -> None:
    for method, params, code in [
        ("no/such", {}, -32601),
        ("server/discover", {}, -32601),
        ("tools/call", {"arguments": {}}, -32602),
        ("logging/setLevel", {"level": "loud"}, -32602),
    ]:
        status, _, body = await session.post(json.loads(on(session, method, params)))
        assert (status, json.loads(body)["error"]["code"]) == (200, code), (method, body)


async def test_a_request_without_a_session_is_400(session: SessionClient) -> None:
    headers = [*JSON, ("mcp-protocol-version", "2025-11-25")]
    result = await drive(session.app, on(session, "tools/list", {}), headers)
    assert result.status == 400
    assert result.messages[0]["error"] == {
        "code": -32600,
        "message": "Bad Request: Mcp-Session-Id header is required",
    }


@pytest.mark.parametrize("session_id", ["unknown-session-id", "x" * 300, "bad id"])
async def test_an_unknown_session_is_404(session: SessionClient, session_id: str) -> None:
    headers = [*JSON, ("mcp-session-id", session_id), ("mcp-protocol-version", "2025-11-25")]
    for body in (
        on(session, "tools/list", {}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ):
        result = await drive(session.app, body, headers)
        if session_id == "bad id":
            assert result.status in (400, 404)
            continue
        assert result.status == 404
        assert result.messages[0]["error"] == {"code": -32001, "message": "Session not found"}


async def test_another_principals_session_is_unknown() -> None:
    server = build(
        principal=lambda ctx: (ctx.headers.get("mcp-tenant") if ctx.headers else None) or "nobody"
    )
    app = server.asgi_app()
    async with app.lifespan():
        opened = await drive(app, initialize("2025-11-25"), JSON)
        session_id = opened.headers["mcp-session-id"]
        body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        mine = await drive(app, body, [*JSON, ("mcp-session-id", session_id)])
        assert mine.status == 200 and "result" in mine.messages[0]
        theirs = await drive(
            app, body, [*JSON, ("mcp-session-id", session_id), ("mcp-tenant", "eve")]
        )
        assert theirs.status == 404
        assert theirs.messages[0]["error"] == {"code": -32001, "message": "Session not found"}


async def test_a_modern_version_header_on_a_session_is_400(session: SessionClient) -> None:
    headers = [
        *JSON,
        ("mcp-session-id", session.session_id or ""),
        ("mcp-protocol-version", "2026-07-28"),
    ]
    result = await drive(session.app, on(session, "tools/list", {}), headers)
    assert result.status == 400
    assert (
        result.messages[0]["error"]["message"]
        == "Bad Request: Unsupported protocol version: 2026-07-28"
    )


# ---------------------------------------------------------------------------- tools


async def test_a_tool_asks_the_client_by_a_pushed_request(session: SessionClient) -> None:
    result = await session.call_tool("greet", {})
    text = result["content"][0]["text"]
    assert text.startswith("Hello, Ada! state={'asked': 'name'} pid=")
    assert (await session.call_tool("ask_model", {"prompt": "?"}))["content"][0][
        "text"
    ] == "model said 42"
    assert (await session.call_tool("roots", {}))["structuredContent"] == {"result": 2}


async def test_one_tool_one_answer_function_both_eras() -> None:
    """The same tool, answered by the same function, through MRTR and through a push."""
    server = build()
    async with open_client(server) as modern:
        by_rounds = await modern.call_tool("ask_model", {"prompt": "?"}, answer=say_ada)
    async with open_session(build(), answer=say_ada) as old:
        by_push = await old.call_tool("ask_model", {"prompt": "?"})
    assert by_rounds["content"] == by_push["content"] == [{"type": "text", "text": "model said 42"}]


async def test_an_answer_that_is_not_the_result_type_fails_the_call(session: SessionClient) -> None:
    with pytest.raises(RpcError) as refused:
        await session.call_tool(
            "ask_model", {"prompt": "?"}, answer=lambda key, request: {"nonsense": True}
        )
    assert refused.value.code == -32602
    assert refused.value.message.startswith(
        "The client's answer to sampling/createMessage is not a valid CreateMessageResult: "
    )


async def test_a_client_error_answer_fails_the_call(session: SessionClient) -> None:
    session.answer = None  # the test client answers pushed requests with -32601
    with pytest.raises(RpcError) as refused:
        await session.call_tool("greet", {})
    assert refused.value.code == -32603
    assert refused.value.message == (
        "The client answered elicitation/create with an error: This test client answers no requests"
    )


async def test_a_push_never_answered_times_out_and_the_client_is_told() -> None:
    server = build(sessions=Sessions(push_timeout=0.2))
    never = trio.Event()

    async def silent(key: str, request: dict[str, Any]) -> dict[str, Any]:
        await never.wait()
        raise AssertionError("unreachable")

    async with open_session(server) as session:
        body = on(session, "tools/call", {"name": "greet", "arguments": {}})
        with trio.fail_after(10):
            result = await drive(session.app, body, session.headers())
    pushed, cancelled, final = result.messages
    assert pushed["method"] == "elicitation/create"
    assert cancelled == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": pushed["id"], "reason": "not answered within 0.2 s"},
    }
    assert final["error"] == {
        "code": -32603,
        "message": "The client did not answer elicitation/create within 0.2 s",
    }


async def test_a_client_without_the_capability_is_refused(session: SessionClient) -> None:
    async with open_session(build(), capabilities={}) as bare:
        with pytest.raises(RpcError) as refused:
            await bare.call_tool("greet", {})
    assert refused.value.code == -32021
    assert refused.value.data == {"requiredCapabilities": {"elicitation": {}}}


async def test_progress_and_logs_after_set_level_go_on_the_post_stream(
    session: SessionClient,
) -> None:
    await session.request("logging/setLevel", {"level": "info"})
    await session.call_tool("chatty", {})
    logged = [n["params"] for n in session.notifications if n["method"] == "notifications/message"]
    assert logged == [
        {"level": "info", "data": "a info line"},
        {"level": "error", "data": "a error line"},
    ]


async def test_notifications_cancelled_cancels_the_running_call(session: SessionClient) -> None:
    body = on(
        session,
        "tools/call",
        {"name": "sleeper", "arguments": {}, "_meta": {"progressToken": "p"}},
        request_id="slow",
    )
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            done: list[Any] = []

            async def call() -> None:
                done.append(await drive(session.app, body, session.headers()))

            nursery.start_soon(call)
            await trio.sleep(0.2)
            status = await session.notify(
                "notifications/cancelled", {"requestId": "slow", "reason": "enough"}
            )
            assert status == 202
    messages = done[0].messages
    assert messages[0]["method"] == "notifications/progress"
    assert messages[-1] == {
        "jsonrpc": "2.0",
        "id": "slow",
        "error": {"code": -32800, "message": "Request cancelled"},
    }


async def test_an_answer_to_no_pushed_request_is_taken_and_dropped(session: SessionClient) -> None:
    status, _, body = await session.post({"jsonrpc": "2.0", "id": "presa-nobody-1", "result": {}})
    assert (status, body) == (202, b"")
    status, _, body = await session.post(
        {"jsonrpc": "2.0", "id": 5, "error": {"code": 1, "message": "x"}}
    )
    assert (status, body) == (202, b"")
    assert await session.request("ping") == {}


# ---------------------------------------------------------------------------- GET and DELETE


async def read_until(stream: Any, method: str) -> dict[str, Any]:
    while True:
        message: dict[str, Any] = await stream.next()
        if message.get("method") == method:
            return message


async def test_the_get_stream_carries_list_changes_and_subscribed_updates(
    session: SessionClient,
) -> None:
    async with session.get_stream() as stream:
        assert stream.status == 200
        assert await session.request("resources/subscribe", {"uri": "test://watched"}) == {}
        await session.call_tool("touch", {"uri": "test://watched"})
        await session.call_tool("touch", {"uri": "test://other"})
        with trio.fail_after(5):
            first = await stream.next()
            second = await stream.next()
        got = sorted([first, second], key=lambda m: m["method"])
        assert got == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "test://watched"},
            },
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        ]
        # a second GET for the same session is a conflict
        second_get = await drive(session.app, b"", session.headers(), method="GET")
        assert second_get.status == 409
        # DELETE ends the session: its GET stream closes, its requests are 404
        assert await session.close() == 200
        with trio.fail_after(5), pytest.raises(EOFError):
            while True:
                await stream.next()
    gone = await drive(session.app, on(session, "ping"), session.headers())
    assert gone.status == 404


async def test_get_and_delete_without_a_session_are_405() -> None:
    app = build().asgi_app()
    async with app.lifespan():
        for method in ("GET", "DELETE"):
            result = await drive(app, b"", JSON, method=method)
            assert (result.status, result.headers["allow"]) == (405, "POST")


async def test_delete_of_an_unknown_session_is_404(session: SessionClient) -> None:
    headers = [*JSON, ("mcp-session-id", "no-such-session")]
    result = await drive(session.app, b"", headers, method="DELETE")
    assert result.status == 404


async def test_a_modern_only_server_serves_no_session() -> None:
    app = build(legacy=False).asgi_app()
    async with app.lifespan():
        result = await drive(app, initialize("2025-11-25"), JSON)
        assert result.status == 400
        assert result.messages[0]["error"]["code"] == -32022
        headers = [*JSON, ("mcp-session-id", "abc")]
        assert (await drive(app, b"", headers, method="GET")).status == 405


async def test_sessions_are_bounded_per_principal_and_in_all() -> None:
    server = build(
        sessions=Sessions(max_sessions=3, max_sessions_per_principal=2),
        principal=lambda ctx: (
            "p" if ctx.headers is None else (ctx.headers.get("mcp-tenant") or "p")
        ),
    )
    app = server.asgi_app()
    async with app.lifespan():
        statuses = [
            (await drive(app, initialize("2025-11-25"), [*JSON, ("mcp-tenant", "a")])).status
            for _ in range(3)
        ]
        assert statuses == [200, 200, 503]
        refused = await drive(app, initialize("2025-11-25"), [*JSON, ("mcp-tenant", "a")])
        assert refused.messages[0]["error"]["data"] == {
            "retryable": True,
            "limit": "max_sessions_per_principal",
        }
        assert (
            await drive(app, initialize("2025-11-25"), [*JSON, ("mcp-tenant", "b")])
        ).status == 200
        full = await drive(app, initialize("2025-11-25"), [*JSON, ("mcp-tenant", "c")])
        assert full.messages[0]["error"]["data"] == {"retryable": True, "limit": "max_sessions"}


async def test_a_modern_client_still_lands_on_2026_07_28(client: Client) -> None:
    result = await client.discover()
    assert result["supportedVersions"] == ["2026-07-28"]
    assert client.last is not None


async def test_a_tool_the_version_cannot_describe_is_left_out_of_its_list(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="presa_trio")
    server = build()

    @server.tool(input_schema={"type": "object", "properties": {"x": True}})
    def loose(x: object = None) -> str:
        """Takes anything: its property schema is ``true``, which 2020-12 allows."""
        return "ok"

    async with open_client(server) as modern:
        assert "loose" in [t["name"] for t in await modern.list_tools()]
    for version in ("2025-06-18", "2025-11-25"):
        async with open_session(server, version=version) as old:
            assert "loose" not in [t["name"] for t in await old.list_tools()]
            assert (await old.call_tool("loose", {}))["content"] == [{"type": "text", "text": "ok"}]
    left_out = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert left_out == [
        f"tool 'loose' left out of a {v} tools/list: "
        'Tool at /inputSchema/properties/x: true is not of type "object"'
        for v in ("2025-06-18", "2025-11-25")
    ]


async def test_an_idle_session_expires_and_a_busy_one_lives_on() -> None:
    server = build(sessions=Sessions(idle_ttl=2.0))
    async with open_session(server) as busy, open_session(server) as idle:
        for _ in range(30):  # three seconds of requests, each renewing the busy session
            assert await busy.request("ping") == {}
            await trio.sleep(0.1)
        gone = await drive(idle.app, on(idle, "ping"), idle.headers())
        assert gone.status == 404
        assert gone.messages[0]["error"] == {"code": -32001, "message": "Session not found"}
        assert await busy.request("ping") == {}


async def test_a_session_listening_on_its_get_stream_is_not_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from presa_trio._kernel import legacy

    monkeypatch.setattr(legacy, "KEEPALIVE_SECONDS", 0.1)  # each keepalive renews it
    server = build(sessions=Sessions(idle_ttl=3.0))
    async with open_session(server) as listening, listening.get_stream() as stream:
        assert stream.status == 200
        await trio.sleep(4.0)  # longer than the idle TTL, without a request
        assert await listening.request("ping") == {}


async def test_pushes_waiting_for_one_principals_clients_are_bounded() -> None:
    server = build(
        sessions=Sessions(max_pending_pushes_per_principal=2), principal=lambda ctx: "alice"
    )
    release = trio.Event()

    async def later(key: str, request: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        return {"action": "accept", "content": {"name": "Ada"}}

    app = server.asgi_app()
    async with app.lifespan():
        clients = [SessionClient(app, answer=later) for _ in range(3)]
        for each in clients:
            await each.initialize()
        greetings: list[dict[str, Any]] = []

        async def greet(each: SessionClient) -> None:
            greetings.append(await each.call_tool("greet", {}))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(greet, clients[0])
                nursery.start_soon(greet, clients[1])
                await trio.testing.wait_all_tasks_blocked()  # both wait for their answers
                with pytest.raises(RpcError) as refused:
                    await clients[2].call_tool("greet", {})
                release.set()
    assert refused.value.status == 200  # on a live session
    assert refused.value.data == {"retryable": True, "limit": "max_pending_pushes_per_principal"}
    assert len(greetings) == 2
