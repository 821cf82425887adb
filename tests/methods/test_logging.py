"""Log notifications (``ctx.log``): a server without logging sends none, a logging server sends
what the request's log level allows, and is quiet unless the request asks."""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.conformance import build_server
from presa_trio import Context, Server, Validation
from presa_trio.testing import Client, open_client


def log_meta(level: str | None) -> dict[str, Any]:
    return {} if level is None else {"io.modelcontextprotocol/logLevel": level}


async def test_a_server_without_logging_sends_no_log_notifications() -> None:
    async with open_client(build_server(logging=False)) as client:
        await _no_logs(client)


async def _no_logs(client: Client) -> None:
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
