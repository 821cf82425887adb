"""Reliability at the edges, through the ASGI app: strict JSON over HTTP, results that are not
JSON, logging, legacy ``initialize``, tasks meeting MRTR, every bound a client can push on
(listen streams, requestState, background work, task quotas), body and write deadlines, and
the event-loop watcher."""

from __future__ import annotations

import enum
import json
import logging
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

import pytest
import trio
import trio.testing
from asgi_scope import headers
from asgi_scope import http_scope as raw_scope
from ignored_answers import LOGGER, ignored_keys

from fixtures.conformance import build_server
from presa_trio import (
    Context,
    Limits,
    RequestState,
    Server,
    Timeouts,
    ToolResult,
    Validation,
    content,
    serve_stdio,
)
from presa_trio.ext.tasks import EXTENSION_ID, TaskLimits, TasksExtension
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, HttpResult, RpcError, drive, open_client

V = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
}
TASKS = {"extensions": {EXTENSION_ID: {}}}
WITH_TASKS = {"elicitation": {}, **TASKS}
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
YES = {"action": "accept", "content": {"confirm": True}}
ALICE = {"action": "accept", "content": {"name": "Alice"}}


def call_body(
    name: str, arguments_json: str = "{}", *, request_id: str = "1", meta_json: str | None = None
) -> str:
    """A ``tools/call`` as JSON text, so tests can put in it what ``json.dumps`` never writes."""
    meta = meta_json if meta_json is not None else json.dumps(META)
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":{json.dumps(name)},"arguments":{arguments_json},"_meta":{meta}}}}}'
    )


def only_error(result: HttpResult) -> dict[str, Any]:
    """The single, well-formed JSON-RPC error message of a plain JSON response."""
    assert result.headers["content-type"] == "application/json"
    assert result.headers["content-length"] == str(len(result.body))
    assert b"Traceback" not in result.body
    message = json.loads(result.body)  # well-formed JSON, not just what the helper parsed
    assert result.messages == [message]
    assert message["jsonrpc"] == "2.0"
    assert set(message) <= {"jsonrpc", "id", "error"}
    error: dict[str, Any] = message["error"]
    assert isinstance(error["message"], str) and error["message"]
    return error


async def still_serving(app: Any) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 99, "method": "server/discover", "params": {"_meta": META}}
    )
    after = await drive(app, body, headers())
    assert after.status == 200 and after.response is not None and "result" in after.response


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


# =========================================================================== 2. strict JSON


def deep(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


SURROGATE_BYTES = call_body("slow_compute", '{"label":"@"}').encode().replace(b"@", b"\xed\xa0\x80")
WITH_NAN = json.dumps(META)[:-1] + ',"x":NaN}'
WITH_INFINITY = json.dumps(META)[:-1] + ',"progressToken":Infinity}'
DEEP_OBJECTS = '{"address":' + '{"a":' * 900 + "1" + "}" * 900 + "}"

#: id -> (the tool the Mcp-Name header names, a body that is not strict JSON)
PARSE_ERRORS: dict[str, tuple[str, str | bytes]] = {
    "lone surrogate id": (
        "test_simple_text",
        call_body("test_simple_text", request_id='"\\ud800"'),
    ),
    "lone low surrogate": ("slow_compute", call_body("slow_compute", '{"label":"a\\udc00b"}')),
    "high then a letter": ("slow_compute", call_body("slow_compute", '{"label":"\\ud800\\u0041"}')),
    "utf-8 surrogate bytes": ("slow_compute", SURROGATE_BYTES),
    "NaN in _meta": ("test_simple_text", call_body("test_simple_text", meta_json=WITH_NAN)),
    "Infinity in _meta": (
        "test_simple_text",
        call_body("test_simple_text", meta_json=WITH_INFINITY),
    ),
    "slow_compute 300 deep": (
        "slow_compute",
        call_body("slow_compute", '{"label":' + deep(300) + "}"),
    ),
    "slow_compute 900 deep": (
        "slow_compute",
        call_body("slow_compute", '{"label":' + deep(900) + "}"),
    ),
    "2020-12 tool 300 deep": (
        "json_schema_2020_12_tool",
        call_body("json_schema_2020_12_tool", '{"name":' + deep(300) + "}"),
    ),
    "2020-12 tool 900 deep": (
        "json_schema_2020_12_tool",
        call_body("json_schema_2020_12_tool", DEEP_OBJECTS),
    ),
}


@pytest.mark.parametrize(("tool", "body"), list(PARSE_ERRORS.values()), ids=list(PARSE_ERRORS))
async def test_strict_json_over_http(
    client: Client, tool: str, body: str | bytes, caplog: pytest.LogCaptureFixture
) -> None:
    result = await drive(client.app, body, headers("tools/call", mcp_name=tool))
    assert result.status == 400, result.body
    error = only_error(result)
    assert error["code"] == -32700
    assert error["message"].startswith("Parse error")
    assert "id" not in result.messages[0]
    await still_serving(client.app)
    assert errors_logged(caplog) == []


async def test_the_same_calls_without_the_bad_bits_are_served(client: Client) -> None:
    # Guards the parametrized bodies above: with valid JSON in place they reach the tool.
    fine = call_body("slow_compute", '{"label":"\\ud83d\\ude00"}')
    result = await drive(client.app, fine, headers("tools/call", mcp_name="slow_compute"))
    assert result.status == 200
    assert result.response is not None
    assert result.response["result"]["content"][0]["text"] == "Completed \U0001f600"
    nested_ok = call_body("json_schema_2020_12_tool", '{"email":"e","name":"n"}')
    result = await drive(
        client.app, nested_ok, headers("tools/call", mcp_name="json_schema_2020_12_tool")
    )
    assert result.status == 200 and result.response is not None
    assert result.response["result"].get("isError") is not True


# =========================================================================== 3. results not JSON


def nan_server(**tasks_options: Any) -> Server:
    server = Server("nan", "1", validation=Validation(outbound=True), loop_warning=None)
    server.add_extension(TasksExtension(**tasks_options))

    @server.tool(options={"tasks": "optional"})
    async def not_json() -> ToolResult:
        """Returns NaN in its structured content."""
        await trio.lowlevel.checkpoint()
        return ToolResult(content=[content.text("nan")], structured={"x": float("nan")})

    @server.tool(options={"tasks": "optional"})
    async def lone_surrogate() -> str:
        """Returns a string with an unpaired surrogate: no UTF-8 encoding, so not JSON."""
        await trio.lowlevel.checkpoint()
        return "a\udc00b"

    @server.tool(options={"tasks": "optional"})
    async def opaque() -> ToolResult:
        """Returns an object no JSON writer knows in its ``_meta``."""
        await trio.lowlevel.checkpoint()
        return ToolResult(content=[content.text("opaque")], meta={"at": object()})

    @server.tool(options={"tasks": "optional"})
    async def big(size: int) -> str:
        """Returns ``size`` characters."""
        await trio.lowlevel.checkpoint()
        return "y" * size

    return server


@pytest.mark.parametrize("tool", ["not_json", "lone_surrogate", "opaque"])
async def test_a_result_that_is_not_json_is_an_internal_error(
    tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_client(nan_server(), capabilities={}) as client:
        message = client.message("tools/call", {"name": tool, "arguments": {}})
        result = await client.send(message)
        error = only_error(result)
        assert error == {"code": -32603, "message": "Internal error"}
        assert result.messages[0]["id"] == message["id"]
        assert result.status == 500, "a -32603 decided before streaming is HTTP 500"
    # One line saying what happened, not a traceback from inside the JSON writer.
    (logged,) = errors_logged(caplog)
    assert logged.getMessage().startswith("the tools/call result is not JSON and was dropped")
    assert logged.exc_info is None


async def poll_until_terminal(client: Client, task_id: str) -> tuple[dict[str, Any], list[str]]:
    """Poll tasks/get (each answer must be HTTP 200) until the task ends; the statuses seen."""
    seen: list[str] = []
    with trio.fail_after(10):
        while True:
            task = await client.get_task(task_id)
            assert client.last.status == 200
            seen.append(task["status"])
            if task["status"] in ("completed", "failed", "cancelled"):
                return task, seen
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(0.001)


@pytest.mark.parametrize("tool", ["not_json", "lone_surrogate", "opaque"])
async def test_a_task_result_that_is_not_json_fails_the_task(tool: str) -> None:
    async with open_client(nan_server(), capabilities=TASKS) as client:
        task_id = await client.create_task(tool)
        task, _ = await poll_until_terminal(client, task_id)
        assert task["status"] == "failed"
        assert task["error"] == {"code": -32603, "message": "Task result is not JSON"}
        assert "result" not in task
        for _ in range(3):  # and it reads back, as JSON, every time
            again = await client.get_task(task_id)
            assert client.last.status == 200 and again["status"] == "failed"


async def test_a_task_result_over_the_size_bound_fails_the_task() -> None:
    async with open_client(nan_server(max_result_bytes=1000), capabilities=TASKS) as client:
        small = await client.create_task("big", {"size": 100})
        task, _ = await poll_until_terminal(client, small)
        assert task["status"] == "completed"
        assert task["result"]["content"] == [{"type": "text", "text": "y" * 100}]
        large = await client.create_task("big", {"size": 5000})
        task, _ = await poll_until_terminal(client, large)
        assert task["status"] == "failed"
        assert task["error"] == {
            "code": -32603,
            "message": "Task result is larger than 1000 bytes",
        }


class Shade(enum.Enum):
    DARK = "dark"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_task_result_with_a_uuid_and_an_enum_is_json_as_the_wire_writes_it(
    store: str, tmp_path: Path
) -> None:
    """The wire writes a UUID as its text and an Enum by its value; a task's result is
    checked, and a SQL store keeps it, with that same writer, so such a result completes
    its task on every store, as it answers a plain call."""
    server = Server("typed", "1", loop_warning=None)
    server.add_extension(TasksExtension())

    @server.tool(options={"tasks": "optional"})
    async def ids() -> dict[str, Any]:
        """Returns a content block as is, a UUID and an Enum in its ``_meta``."""
        await trio.lowlevel.checkpoint()
        meta = {"id": uuid.UUID(int=1), "shade": Shade.DARK}
        return {"type": "text", "text": "ids", "_meta": meta}

    backend = f"sqlite:///{tmp_path}/tasks.db" if store == "sqlite" else None
    written = {"id": "00000000-0000-0000-0000-000000000001", "shade": "dark"}
    async with open_client(server, capabilities={}) as plain:
        direct = await plain.call_tool("ids")
        assert direct["content"] == [{"type": "text", "text": "ids", "_meta": written}]
    async with open_client(server.asgi_app(backend=backend), capabilities=TASKS) as client:
        task_id = await client.create_task("ids")
        task, _ = await poll_until_terminal(client, task_id)
        assert task["status"] == "completed", task
        assert task["result"]["content"] == [{"type": "text", "text": "ids", "_meta": written}]


# =========================================================================== 4. outputSchema


class Point(TypedDict):
    x: int
    y: int


async def test_output_that_breaks_the_output_schema_is_a_tool_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server("out", "1", validation=Validation(outbound=True), loop_warning=None)

    @server.tool()
    async def point(good: bool) -> Point:
        """A point, or something that is not one."""
        await trio.lowlevel.checkpoint()
        if good:
            return {"x": 1, "y": 2}
        return {"x": "one"}  # type: ignore[typeddict-item]

    async with open_client(server, capabilities={}) as client:
        (tool,) = await client.list_tools()
        assert tool["outputSchema"]["required"] == ["x", "y"]
        ok = await client.call_tool("point", {"good": True})
        assert ok["structuredContent"] == {"x": 1, "y": 2}
        bad = await client.call_tool("point", {"good": False})
        assert client.last.status == 200
        assert bad["resultType"] == "complete"
        assert bad["isError"] is True
        assert bad["content"] == [
            {
                "type": "text",
                "text": "Tool point returned output that does not match its outputSchema",
            }
        ]
        assert "structuredContent" not in bad
    logged = [r.getMessage() for r in errors_logged(caplog)]
    assert len(logged) == 1
    assert "point" in logged[0] and "outputSchema" in logged[0]


# =========================================================================== 5. logging


def log_meta(level: str | None) -> dict[str, Any]:
    return {} if level is None else {"io.modelcontextprotocol/logLevel": level}


async def test_a_server_without_logging_sends_no_log_notifications(client: Client) -> None:
    message = client.message(
        "tools/call",
        {"name": "test_logging_tool", "arguments": {}},
        meta=log_meta("debug"),
    )
    result = await client.send(message)
    assert result.status == 200
    assert result.headers["content-type"] == "application/json"
    assert result.notifications == []
    assert result.response is not None
    assert result.response["result"]["content"][0]["text"] == "Logging evaluated"
    assert "logging" not in (await client.discover())["capabilities"]


def logging_server() -> Server:
    server = Server(
        "logs", "1", validation=Validation(outbound=True), logging=True, loop_warning=None
    )

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Logs at info."""
        await ctx.log("info", {"said": "hello"}, logger="chatty")
        return "done"

    return server


@pytest.mark.parametrize("level", ["debug", "info"])
async def test_a_logging_server_sends_what_the_request_allows(level: str) -> None:
    async with open_client(logging_server(), capabilities={}) as client:
        assert (await client.discover())["capabilities"]["logging"] == {}
        message = client.message(
            "tools/call", {"name": "chatty", "arguments": {}}, meta=log_meta(level)
        )
        result = await client.send(message)
        assert result.status == 200
        assert result.headers["content-type"] == "text/event-stream"
        assert result.notifications == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": {"said": "hello"}, "logger": "chatty"},
            }
        ]
        assert result.response is not None
        assert result.response["result"]["content"][0]["text"] == "done"


@pytest.mark.parametrize("level", [None, "warning", "emergency"])
async def test_a_logging_server_is_quiet_unless_asked(level: str | None) -> None:
    async with open_client(logging_server(), capabilities={}) as client:
        message = client.message(
            "tools/call", {"name": "chatty", "arguments": {}}, meta=log_meta(level)
        )
        result = await client.send(message)
        assert result.status == 200
        assert result.headers["content-type"] == "application/json"
        assert result.notifications == []
        assert result.response is not None
        assert result.response["result"]["content"][0]["text"] == "done"


# =========================================================================== 6. legacy initialize


LEGACY_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "old-client", "version": "1.0"},
}
PLAIN = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]


def legacy_initialize(params: Mapping[str, Any] | None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    if params is not None:
        message["params"] = dict(params)
    return json.dumps(message)


@pytest.mark.parametrize(
    ("params", "extra_headers", "requested"),
    [
        (LEGACY_PARAMS, [], "2025-11-25"),
        (LEGACY_PARAMS, [("mcp-protocol-version", "2025-11-25")], "2025-11-25"),
        (None, [("mcp-protocol-version", "2025-06-18")], "2025-06-18"),
        ({**LEGACY_PARAMS, "protocolVersion": "2024-11-05"}, [], "2024-11-05"),
        (
            {**LEGACY_PARAMS, "protocolVersion": "2024-11-05"},
            [("mcp-protocol-version", "2025-06-18")],
            "2024-11-05",  # the params' version wins over the header's
        ),
        (None, [], "unknown"),
        ({"capabilities": {}}, [], "unknown"),
    ],
    ids=["no-header", "header", "header-no-params", "old", "both", "nothing", "no-version"],
)
async def test_legacy_initialize_learns_the_supported_versions(
    client: Client,
    params: Mapping[str, Any] | None,
    extra_headers: list[tuple[str, str]],
    requested: str,
) -> None:
    result = await drive(client.app, legacy_initialize(params), PLAIN + extra_headers)
    assert result.status == 400, result.body
    error = only_error(result)
    assert result.messages[0]["id"] == 1
    assert error["code"] == -32022
    assert error["data"] == {"supported": [V], "requested": requested}
    await still_serving(client.app)


async def test_initialize_in_the_new_dialect_is_an_unknown_method(client: Client) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"_meta": META}}
    )
    result = await drive(client.app, body, headers("initialize"))
    assert result.status == 404
    error = only_error(result)
    assert result.messages[0]["id"] == 5
    assert error == {"code": -32601, "message": "Method not found: initialize"}


async def test_legacy_initialize_over_stdio() -> None:
    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    server_out, from_server = trio.testing.memory_stream_one_way_pair()

    async def run() -> None:
        await serve_stdio(build_server(), stdin=server_in, stdout=server_out)
        await server_out.aclose()

    async def line() -> dict[str, Any]:
        buffer = b""
        while not buffer.endswith(b"\n"):
            buffer += await from_server.receive_some(1)
        message: dict[str, Any] = json.loads(buffer)
        return message

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await to_server.send_all(legacy_initialize(LEGACY_PARAMS).encode() + b"\n")
            assert await line() == {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {
                    "code": -32022,
                    "message": "Unsupported protocol version",
                    "data": {"supported": [V], "requested": "2025-11-25"},
                },
            }
            await to_server.send_all(legacy_initialize(None).encode() + b"\n")
            assert (await line())["error"]["data"] == {"supported": [V], "requested": "unknown"}
            await to_server.aclose()


# =========================================================================== 7. tasks and MRTR


async def test_a_task_never_asks_for_what_the_client_did_not_declare(
    fixture_server: Server,
) -> None:
    async with open_client(fixture_server, capabilities=TASKS) as client:
        task_id = await client.create_task("confirm_delete", {"filename": "a.txt"})
        task, seen = await poll_until_terminal(client, task_id)
        assert task["status"] == "failed"
        assert task["error"]["code"] == -32021
        assert task["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}
        assert "input_required" not in seen
        assert "inputRequests" not in task
        runtime = client.app.runtime
        assert runtime is not None
        assert runtime.service(EXTENSION_ID).runner.parked_count() == 0


async def test_input_responses_without_request_state_do_not_answer_a_task(
    fixture_server: Server,
) -> None:
    async with open_client(fixture_server, capabilities=WITH_TASKS) as client:
        result = await client.call_tool(
            "confirm_delete", {"filename": "a.txt"}, input_responses={"confirm-delete": YES}
        )
        assert result["resultType"] == "task"
        task_id = result["taskId"]
        with trio.fail_after(10):
            parked = await client.wait_task(task_id, ("input_required", "completed", "failed"))
        assert parked["status"] == "input_required"
        assert list(parked["inputRequests"]) == ["confirm-delete"]
        await client.update_task(task_id, {"confirm-delete": YES})
        done, _ = await poll_until_terminal(client, task_id)
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "Delete confirmed: true"}]


async def test_mrtr_round_then_a_task_with_a_verified_state(fixture_server: Server) -> None:
    async with open_client(fixture_server, capabilities=WITH_TASKS) as client:
        first = await client.call_tool("test_tool_with_task", {})
        assert first["resultType"] == "input_required"
        assert list(first["inputRequests"]) == ["user_name"]
        created = await client.call_tool(
            "test_tool_with_task",
            {},
            input_responses={"user_name": ALICE},
            request_state=first["requestState"],
        )
        assert created["resultType"] == "task"
        done, seen = await poll_until_terminal(client, created["taskId"])
        assert "input_required" not in seen
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "Hello, Alice"}]


# =========================================================================== 8. tasks/update


@pytest.mark.parametrize("ending", ["cancelled", "completed"])
async def test_update_on_a_finished_task_is_acknowledged_and_changes_nothing(
    fixture_server: Server, ending: str, caplog: pytest.LogCaptureFixture
) -> None:
    """SEP-2663: answers no one waits for are ignored; T§4.3: acknowledged, no change."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with open_client(fixture_server, capabilities=WITH_TASKS) as client:
        seconds = 3600 if ending == "cancelled" else 0
        task_id = await client.create_task("slow_compute", {"seconds": seconds, "label": "x"})
        if ending == "cancelled":
            await client.cancel_task(task_id)
        task, _ = await poll_until_terminal(client, task_id)
        assert task["status"] == ending
        ack = await client.update_task(task_id, {"confirm-delete": YES})
        assert client.last.status == 200
        assert ack["resultType"] == "complete" and list(ack["_meta"]) == [SERVER_INFO_KEY]
        assert await client.get_task(task_id) == task
        assert ignored_keys(caplog, task_id) == [["confirm-delete"]]


async def test_update_with_a_key_never_asked_for_is_acknowledged_and_logged(
    fixture_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with open_client(fixture_server, capabilities=WITH_TASKS) as client:
        task_id = await client.create_task("confirm_delete", {"filename": "a.txt"})
        with trio.fail_after(10):
            await client.wait_task(task_id, ("input_required",))
        ack = await client.update_task(task_id, {"that-key": YES})
        assert client.last.status == 200
        assert list(ack["_meta"]) == [SERVER_INFO_KEY]  # nothing about the keys on the wire
        assert ignored_keys(caplog, task_id) == [["that-key"]]
        await trio.testing.wait_all_tasks_blocked()
        still = await client.get_task(task_id)
        assert still["status"] == "input_required"
        assert list(still["inputRequests"]) == ["confirm-delete"]
        mixed = await client.update_task(task_id, {"confirm-delete": YES, "zzz": YES, "a": YES})
        assert mixed == ack
        assert ignored_keys(caplog, task_id) == [["that-key"], ["a", "zzz"]]
        done, _ = await poll_until_terminal(client, task_id)
        assert done["result"]["content"][0]["text"] == "Delete confirmed: true"


# =========================================================================== 9. task input size


async def test_a_large_input_runs_synchronously_or_is_refused(fixture_server: Server) -> None:
    label = "z" * 400_000
    async with open_client(fixture_server, capabilities=TASKS) as client:
        result = await client.call_tool("slow_compute", {"seconds": 0, "label": label})
        assert result["resultType"] == "complete"
        assert result["content"] == [{"type": "text", "text": f"Completed {label}"}]
        small = await client.call_tool("slow_compute", {"seconds": 0, "label": "small"})
        assert small["resultType"] == "task"
        with pytest.raises(RpcError) as caught:
            await client.call_tool("failing_job", {"blob": label})
        assert (caught.value.code, caught.value.status) == (-32602, 400)
        assert "262144" in caught.value.message
        runtime = client.app.runtime
        assert runtime is not None
        assert await runtime.service(EXTENSION_ID).store.count() == 1  # only "small"


# =========================================================================== 10. listen bounds


async def test_listen_streams_are_bounded() -> None:
    server = Server(
        "listen",
        "1",
        validation=Validation(outbound=True),
        limits=Limits(max_listeners=2),
        loop_warning=None,
    )

    @server.tool()
    def noop() -> str:
        """Nothing."""
        return "ok"

    async with open_client(server, capabilities={}) as client:
        runtime = client.app.runtime
        assert runtime is not None
        with trio.fail_after(10):
            async with client.listen({"toolsListChanged": True}) as first:
                await first.next()
                async with client.listen({"toolsListChanged": True}) as second:
                    await second.next()
                    assert runtime.bus.listener_count == 2
                    with pytest.raises(RpcError) as caught:
                        await client.request(
                            "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
                        )
                    assert (caught.value.code, caught.value.status) == (-32603, 503)
                    assert caught.value.data == {"retryable": True, "limit": "max_listen_streams"}
                    assert runtime.bus.listener_count == 2
                await trio.testing.wait_all_tasks_blocked()
                assert runtime.bus.listener_count == 1
                async with client.listen({"toolsListChanged": True}) as third:
                    ack = await third.next()
                    assert ack["method"] == "notifications/subscriptions/acknowledged"
                    assert runtime.bus.listener_count == 2
                    assert runtime.notify_tools_changed() == 2
                    assert (await third.next())["method"] == "notifications/tools/list_changed"
                    assert (await first.next())["method"] == "notifications/tools/list_changed"


async def test_listen_task_ids_are_bounded(fixture_server: Server) -> None:
    async with open_client(fixture_server, capabilities=TASKS) as client:
        with pytest.raises(RpcError) as caught:
            await client.request(
                "subscriptions/listen",
                {"notifications": {"taskIds": [f"t{i}" for i in range(101)]}},
            )
        assert (caught.value.code, caught.value.status) == (-32602, 400)
        with trio.fail_after(10):
            async with client.listen({"taskIds": [f"t{i}" for i in range(100)]}) as stream:
                ack = await stream.next()
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                assert ack["params"]["notifications"] == {}  # none of them is a known task


# =========================================================================== 11. requestState


def state_server(state: Mapping[str, Any]) -> Server:
    server = Server(
        "state",
        "1",
        validation=Validation(outbound=True),
        request_state=RequestState(max_bytes=65536),
        loop_warning=None,
    )

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Asks a question, keeping ``state`` for the retry."""
        answer = await ctx.input(
            {"q": elicit("Name?", {"name": {"type": "string"}}, ["name"])}, state=dict(state)
        )
        return f"{answer['q']['content']['name']} {sorted(ctx.state or {})}"

    return server


@pytest.mark.parametrize(
    "state", [{"blob": "x" * 100_000}, {"n": float("nan")}], ids=["too-large", "nan"]
)
async def test_a_request_state_that_cannot_be_issued_is_an_internal_error(
    state: dict[str, Any],
) -> None:
    async with open_client(state_server(state), capabilities={"elicitation": {}}) as client:
        message = client.message("tools/call", {"name": "ask", "arguments": {}})
        result = await client.send(message)
        assert result.status == 500
        error = only_error(result)
        assert error["code"] == -32603
        assert "requestState" in error["message"]
        assert b'requestState":' not in result.body  # nothing issued
        assert b"input_required" not in result.body


async def test_a_small_request_state_is_issued_and_verified() -> None:
    async with open_client(state_server({"k": "v" * 100}), capabilities={"elicitation": {}}) as c:
        first = await c.call_tool("ask", {})
        assert first["resultType"] == "input_required"
        assert isinstance(first["requestState"], str)
        assert len(first["requestState"]) <= 65536
        done = await c.call_tool(
            "ask", {}, input_responses={"q": ALICE}, request_state=first["requestState"]
        )
        assert done["content"] == [{"type": "text", "text": "Alice ['k']"}]


# =========================================================================== 12. background work


class Background:
    def __init__(self) -> None:
        self.release = trio.Event()
        self.ran = trio.Event()
        self.cleaned = trio.Event()
        self.log: list[str] = []


def background_server(world: Background, **options: Any) -> Server:
    server = Server("bg", "1", validation=Validation(outbound=True), **options)

    async def work(tag: str) -> None:
        await world.release.wait()
        world.log.append(f"ran {tag}")
        world.ran.set()

    async def boom() -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("background went wrong")

    async def forever() -> None:
        try:
            await trio.sleep_forever()
        finally:
            world.cleaned.set()

    @server.tool()
    async def kick(ctx: Context, tag: str) -> str:
        """Starts work that waits for the test."""
        ctx.start_background(work, tag, name="work")
        world.log.append(f"answered {tag}")
        return "started"

    @server.tool()
    def kick_sync(ctx: Context, tag: str) -> str:
        """The same from a worker thread."""
        ctx.start_background(work, tag)
        return "started from a thread"

    @server.tool()
    async def explode(ctx: Context) -> str:
        """Starts work that fails."""
        ctx.start_background(boom, name="boom")
        return "started"

    @server.tool()
    async def hold(ctx: Context) -> str:
        """Starts work that runs until the run ends."""
        ctx.start_background(forever, name="forever")
        return "holding"

    return server


async def test_background_work_runs_after_the_tool_answered() -> None:
    world = Background()
    async with open_client(background_server(world, loop_warning=None), capabilities={}) as c:
        result = await c.call_tool("kick", {"tag": "a"})
        assert result["content"] == [{"type": "text", "text": "started"}]
        runtime = c.app.runtime
        assert runtime is not None
        assert runtime.background_count == 1  # still pending after the response was read
        assert world.log == ["answered a"]
        world.release.set()
        with trio.fail_after(5):
            await world.ran.wait()
        assert world.log == ["answered a", "ran a"]
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.background_count == 0


async def test_background_work_from_a_sync_tool() -> None:
    world = Background()
    world.release.set()
    async with open_client(background_server(world, loop_warning=None), capabilities={}) as c:
        result = await c.call_tool("kick_sync", {"tag": "t"})
        assert result["content"] == [{"type": "text", "text": "started from a thread"}]
        with trio.fail_after(5):
            await world.ran.wait()
        assert world.log == ["ran t"]


async def test_a_failing_background_task_is_logged_and_stops_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = Background()
    async with open_client(background_server(world, loop_warning=None), capabilities={}) as c:
        await c.call_tool("explode", {})
        runtime = c.app.runtime
        assert runtime is not None
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.background_count == 0
        failures = [r for r in errors_logged(caplog) if "background task" in r.getMessage()]
        assert [r.getMessage() for r in failures] == ["background task boom failed"]
        assert failures[0].exc_info is not None
        assert "background went wrong" in caplog.text
        world.release.set()
        assert (await c.call_tool("kick", {"tag": "next"}))["content"][0]["text"] == "started"
        with trio.fail_after(5):
            await world.ran.wait()
        assert c.app.runtime is runtime  # the run goes on


async def test_background_work_is_bounded() -> None:
    world = Background()
    # max_background=2, and the loop watcher (on by default) holds one of the slots.
    async with open_client(
        background_server(world, limits=Limits(max_background=2)), capabilities={}
    ) as c:
        runtime = c.app.runtime
        assert runtime is not None
        assert runtime.background_count == 1
        assert (await c.call_tool("kick", {"tag": "1"}))["content"][0]["text"] == "started"
        message = c.message("tools/call", {"name": "kick", "arguments": {"tag": "2"}})
        result = await c.send(message)
        assert result.status == 503
        error = only_error(result)
        assert error["code"] == -32603
        assert error["data"] == {"retryable": True, "limit": "max_background_tasks"}
        assert world.log == ["answered 1"]  # the refused call never got past its start
        world.release.set()
        with trio.fail_after(5):
            await world.ran.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.background_count == 1  # the slot is free again
        assert (await c.call_tool("kick", {"tag": "3"}))["content"][0]["text"] == "started"


async def test_background_work_without_the_watcher_has_every_slot() -> None:
    world = Background()
    server = background_server(world, limits=Limits(max_background=2), loop_warning=None)
    async with open_client(server, capabilities={}) as c:
        await c.call_tool("kick", {"tag": "1"})
        await c.call_tool("kick", {"tag": "2"})
        with pytest.raises(RpcError) as caught:
            await c.call_tool("kick", {"tag": "3"})
        assert caught.value.status == 503
        assert caught.value.data["limit"] == "max_background_tasks"
        world.release.set()


async def test_background_work_is_cancelled_when_the_run_ends() -> None:
    world = Background()
    async with open_client(background_server(world, loop_warning=None), capabilities={}) as c:
        await c.call_tool("hold", {})
        await trio.testing.wait_all_tasks_blocked()
        assert not world.cleaned.is_set()
    assert world.cleaned.is_set()


# =========================================================================== 13. task quotas


def _principal(ctx: Context) -> str:
    return str((ctx.meta.client_info or {}).get("name", ""))


async def test_stored_tasks_are_bounded_per_principal() -> None:
    server = Server("quota", "1", validation=Validation(outbound=True), loop_warning=None)
    limits = TaskLimits(max_tasks=None, max_stored_per_principal=3, max_active_per_principal=None)
    server.add_extension(TasksExtension(limits=limits, principal=_principal))

    @server.tool(options={"tasks": "required"})
    async def instant() -> str:
        """Done at once."""
        await trio.lowlevel.checkpoint()
        return "done"

    async with open_client(
        server, capabilities=TASKS, client_info={"name": "A", "version": "1"}
    ) as alice:
        bob = Client(alice.app, capabilities=TASKS, client_info={"name": "B", "version": "1"})
        for _ in range(3):
            task, _seen = await poll_until_terminal(alice, await alice.create_task("instant"))
            assert task["status"] == "completed"
        with pytest.raises(RpcError) as caught:
            await alice.call_tool("instant", {})
        assert (caught.value.code, caught.value.status) == (-32603, 503)
        assert caught.value.data == {
            "retryable": True,
            "limit": "max_stored_tasks_per_principal",
        }
        task, _seen = await poll_until_terminal(bob, await bob.create_task("instant"))
        assert task["status"] == "completed"
        runtime = alice.app.runtime
        assert runtime is not None
        assert await runtime.service(EXTENSION_ID).store.count() == 4


# =========================================================================== 14. deadlines


def http_scope(method: str = "tools/call", name: str | None = None) -> dict[str, Any]:
    extra = {} if name is None else {"mcp_name": name}
    raw = [(b"host", b"127.0.0.1:8000")]
    raw += [(k.encode(), v.encode()) for k, v in headers(method, **extra)]
    return raw_scope(raw)


class Peer:
    """The client side of one raw ASGI exchange, with switches for misbehaving."""

    def __init__(self, chunks: list[bytes], *, body_stalls: bool = False) -> None:
        self.chunks = list(chunks)
        self.body_stalls = body_stalls  # after the chunks: never another byte
        self.disconnect = trio.Event()
        self.sent: list[dict[str, Any]] = []
        self.block_on_body = False
        self.disconnect_during_final = False
        self.final_send_returned = False
        self.receives = 0

    async def receive(self) -> dict[str, Any]:
        self.receives += 1
        if self.chunks:
            chunk = self.chunks.pop(0)
            await trio.lowlevel.checkpoint()
            more = bool(self.chunks) or self.body_stalls
            return {"type": "http.request", "body": chunk, "more_body": more}
        if self.body_stalls:
            await trio.sleep_forever()
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(dict(message))
        if message["type"] != "http.response.body":
            await trio.lowlevel.checkpoint()
            return
        if self.block_on_body:
            await trio.sleep_forever()
        final = not message.get("more_body", False)
        if final and self.disconnect_during_final:
            self.disconnect.set()  # the client goes away while the last write is in flight
            await trio.lowlevel.checkpoint()  # yields, as ``await trio.sleep(0)`` does
            await trio.lowlevel.checkpoint()
            await trio.testing.wait_all_tasks_blocked()
            self.final_send_returned = True
            return
        await trio.lowlevel.checkpoint()

    def starts(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if m["type"] == "http.response.start"]

    def bodies(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if m["type"] == "http.response.body"]


def call_json(name: str, arguments: Mapping[str, Any], **meta: Any) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": dict(arguments), "_meta": {**META, **meta}},
        }
    ).encode()


class Run(enum.Enum):
    """When the app's run (its lifespan) is on, for a request whose body stalls: the body's
    deadline is the request scope's own, on trio's clock, whatever the run does."""

    NONE = "none"  # never
    THROUGHOUT = "throughout"
    STARTS_DURING = "starts-during"
    ENDS_DURING = "ends-during"


@pytest.mark.parametrize("run", list(Run), ids=[run.value for run in Run])
async def test_a_body_that_stops_arriving_gets_one_408(
    run: Run, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0
    app = build_server().asgi_app(timeouts=Timeouts(body=0.5))
    body = call_json("test_simple_text", {})
    peer = Peer([body[:20]], body_stalls=True)
    elapsed: list[float] = []

    async def request() -> None:
        start = trio.current_time()
        await app(http_scope(name="test_simple_text"), peer.receive, peer.send)
        elapsed.append(trio.current_time() - start)

    with trio.fail_after(60):
        if run is Run.NONE:
            await request()
        elif run is Run.THROUGHOUT:
            async with app.lifespan():
                await request()
        else:
            async with trio.open_nursery() as nursery:
                if run is Run.STARTS_DURING:
                    nursery.start_soon(request)
                    await trio.sleep(0.2)
                    async with app.lifespan():
                        await trio.sleep(1)
                else:
                    async with app.lifespan():
                        nursery.start_soon(request)
                        await trio.sleep(0.2)
    (took,) = elapsed
    assert took == pytest.approx(0.5)
    assert [m["status"] for m in peer.starts()] == [408]
    (final,) = peer.bodies()
    assert not final.get("more_body", False)
    message = json.loads(final["body"])
    assert message == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Request body not received within 0.5 s"},
    }
    assert len(peer.sent) == 2


def patient_server() -> Server:
    server = Server("patient", "1", validation=Validation(outbound=True), loop_warning=None)

    @server.tool()
    async def patient() -> str:
        """Waits longer than the body deadline (``Timeouts(body=0.5)``)."""
        await trio.sleep(2.0)
        return "patient"

    return server


async def test_a_request_begun_before_the_run_leaves_its_deadlines_to_trio(
    mock_clock: trio.testing.MockClock,
) -> None:
    # Its body arrives once the run is on, so it is served; its tool then waits longer than
    # the body's deadline, which is lifted once the body is in: every deadline is the
    # request scope's own, on trio's clock, whether or not a run was on when it was set.
    mock_clock.autojump_threshold = 0
    app = patient_server().asgi_app(timeouts=Timeouts(body=0.5))
    peer = Peer([call_json("patient", {})])
    running, answered = trio.Event(), trio.Event()

    async def receive_once_running() -> dict[str, Any]:
        await running.wait()
        return await peer.receive()

    async def request() -> None:
        await app(http_scope(name="patient"), receive_once_running, peer.send)
        answered.set()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request)
            await trio.sleep(0.1)
            async with app.lifespan():
                running.set()
                await answered.wait()
    assert [m["status"] for m in peer.starts()] == [200]
    (final,) = peer.bodies()
    assert json.loads(final["body"])["result"]["content"][0]["text"] == "patient"


def writer_server(world: list[str]) -> Server:
    server = Server("writer", "1", validation=Validation(outbound=True), loop_warning=None)

    @server.tool()
    async def ticker(ctx: Context) -> str:
        """Reports progress forever, noting its cancellation."""
        try:
            step = 0
            while True:
                step += 1
                await ctx.progress(step)
                await trio.sleep(0.1)
        except trio.Cancelled:
            world.append("cancelled")
            raise

    @server.tool()
    async def quick() -> str:
        """Answers at once."""
        await trio.lowlevel.checkpoint()
        return "quick"

    return server


async def test_a_client_that_stops_reading_a_stream_is_dropped(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    world: list[str] = []
    app = writer_server(world).asgi_app(timeouts=Timeouts(write=0.5))
    async with app.lifespan():
        peer = Peer([call_json("ticker", {}, progressToken="p")])
        peer.block_on_body = True
        with trio.fail_after(60):
            await app(http_scope(name="ticker"), peer.receive, peer.send)
    assert world == ["cancelled"]  # the tool's scope was cancelled
    assert [m["status"] for m in peer.starts()] == [200]
    assert len(peer.bodies()) == 1  # the one write that never finished; nothing after it


async def test_a_client_that_stops_reading_a_json_response_is_dropped(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    app = writer_server([]).asgi_app(timeouts=Timeouts(write=0.5))
    async with app.lifespan():
        peer = Peer([call_json("quick", {})])
        peer.block_on_body = True
        start = trio.current_time()
        with trio.fail_after(60):
            await app(http_scope(name="quick"), peer.receive, peer.send)
        assert trio.current_time() - start == pytest.approx(0.5)  # the write's deadline
        assert [m["status"] for m in peer.starts()] == [200]
        assert len(peer.bodies()) == 1


async def test_a_disconnect_during_the_final_write_does_not_interrupt_it() -> None:
    app = writer_server([]).asgi_app()
    async with app.lifespan():
        peer = Peer([call_json("quick", {})])
        peer.disconnect_during_final = True
        with trio.fail_after(10):
            await app(http_scope(name="quick"), peer.receive, peer.send)
        assert peer.disconnect.is_set()
        assert peer.final_send_returned
        assert [m["status"] for m in peer.starts()] == [200]
        (final,) = peer.bodies()
        assert json.loads(final["body"])["result"]["content"][0]["text"] == "quick"


async def test_a_requests_disconnect_watcher_ends_with_it() -> None:
    # Each request is watched for its client's disconnect by a task of its own nursery, from
    # the moment its body is in, also one answered without ever waiting (the watcher's is
    # the second ``receive``). A server that never says ``http.disconnect`` after the answer
    # (ASGI says it should) keeps no watcher alive: the request's end cancels it.
    server = writer_server([])

    @server.tool(thread=False)
    def instant() -> str:
        """Answers without ever waiting."""
        return "instant"

    app = server.asgi_app()
    async with app.lifespan():
        for name in ("instant", "quick"):
            peer = Peer([call_json(name, {})])  # never says http.disconnect
            with trio.fail_after(10):
                await app(http_scope(name=name), peer.receive, peer.send)
            assert peer.receives == 2, name
            assert not peer.disconnect.is_set()
            (final,) = peer.bodies()
            assert json.loads(final["body"])["result"]["content"][0]["text"] == name


async def test_the_body_deadline_does_not_bound_a_request_that_takes_longer(
    mock_clock: trio.testing.MockClock,
) -> None:
    # The request scope's deadline bounds the body's arrival; it is lifted once the body is
    # in, so a tool that outlasts ``body_timeout`` (a sleep, then a sync tool whose run in
    # the event loop lasts past it) still answers.
    mock_clock.autojump_threshold = 0
    server = patient_server()

    @server.tool(thread=False)
    def busy() -> str:
        """Outlasts the body deadline without waiting (the clock jumps under it)."""
        mock_clock.jump(2.0)
        return "busy"

    app = server.asgi_app(timeouts=Timeouts(body=0.5))
    async with app.lifespan():
        for name in ("patient", "busy"):
            peer = Peer([call_json(name, {})])
            with trio.fail_after(60):
                await app(http_scope(name=name), peer.receive, peer.send)
            assert [m["status"] for m in peer.starts()] == [200], name
            (final,) = peer.bodies()
            assert json.loads(final["body"])["result"]["content"][0]["text"] == name


# =========================================================================== 15. loop watcher


def blocking_server(loop_warning: float | None) -> Server:
    server = Server("blocker", "1", validation=Validation(outbound=True), loop_warning=loop_warning)

    @server.tool()
    async def block() -> str:
        """Blocks the event loop (the mistake the watcher reports)."""
        time.sleep(0.5)  # noqa: ASYNC251 - blocking on purpose
        await trio.lowlevel.checkpoint()
        return "blocked"

    return server


class Warnings(logging.Handler):
    """Counts the watcher's warnings and wakes the test at each one."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.changed = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING and "the event loop was blocked" in (
            record.getMessage()
        ):
            self.records.append(record)
            self.changed.set()
            self.changed = trio.Event()

    async def wait_for(self, count: int) -> None:
        with trio.fail_after(5):
            while len(self.records) < count:
                await self.changed.wait()


@pytest.fixture
def warnings_seen() -> Any:
    handler = Warnings()
    watched = logging.getLogger("presa_trio")
    watched.addHandler(handler)
    try:
        yield handler
    finally:
        watched.removeHandler(handler)


async def test_the_loop_watcher_warns_once_per_episode(warnings_seen: Warnings) -> None:
    async with open_client(blocking_server(0.2), capabilities={}) as client:
        await trio.sleep(0.1)  # the watcher is asleep in its period
        assert warnings_seen.records == []
        await client.call_tool("block", {})
        await warnings_seen.wait_for(1)
        await trio.sleep(0.3)  # several quiet periods: the episode is over
        assert len(warnings_seen.records) == 1
        await client.call_tool("block", {})
        await warnings_seen.wait_for(2)
        await trio.sleep(0.3)
        assert len(warnings_seen.records) == 2
        assert warnings_seen.records[0].name == "presa_trio"


async def test_no_loop_watcher_when_switched_off(warnings_seen: Warnings) -> None:
    async with open_client(blocking_server(None), capabilities={}) as client:
        runtime = client.app.runtime
        assert runtime is not None
        assert runtime.background_count == 0
        await client.call_tool("block", {})
        await trio.sleep(0.3)
    assert warnings_seen.records == []
