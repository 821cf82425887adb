"""One principal holding its full share of listen streams leaves the rest to the others, over
HTTP: a real hypercorn trio worker on 127.0.0.1, two principals by their bearer tokens, each
stream a connection of its own (issue 34: one principal shut every other out)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
import trio
from support.live_http import Connection, mcp_request, open_exchange, request
from support.servers import ROOT, running

pytestmark = pytest.mark.e2e

ACK = "notifications/subscriptions/acknowledged"
TOOLS = {"toolsListChanged": True}


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with running("fairness_app:app", ROOT / "tests" / "support") as served:
        yield served.port


def listen_request(token: str, request_id: int) -> tuple[bytes, list[tuple[str, str]]]:
    body, headers = mcp_request(
        "subscriptions/listen", {"notifications": TOOLS}, request_id=request_id
    )
    return body, [*headers, ("authorization", f"Bearer {token}")]


@asynccontextmanager
async def stream(port: int, token: str, request_id: int) -> AsyncIterator[Connection]:
    """An open listen stream of ``token``'s principal, its acknowledgement read."""
    async with open_exchange(port, *listen_request(token, request_id)) as connection:
        assert connection.status == 200, connection.status
        assert connection.headers["content-type"].startswith("text/event-stream")
        ack = await connection.next_message()
        assert ack["method"] == ACK
        assert ack["params"]["notifications"] == TOOLS
        assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == request_id
        yield connection


async def refusal(port: int, token: str, request_id: int) -> tuple[int, dict[str, Any]]:
    """The HTTP status and the JSON-RPC error of a listen request that must be refused."""
    response = await request(port, *listen_request(token, request_id))
    assert response.headers["content-type"].startswith("application/json"), response
    (message,) = response.messages
    assert message["id"] == request_id and set(message) == {"jsonrpc", "id", "error"}
    error: dict[str, Any] = message["error"]
    assert isinstance(error.pop("message"), str)
    return response.status, error


def refused(limit: str) -> tuple[int, dict[str, Any]]:
    return 503, {"code": -32603, "data": {"retryable": True, "limit": limit}}


async def test_one_principal_at_its_share_leaves_streams_to_another(port: int) -> None:
    with trio.fail_after(60):
        async with AsyncExitStack() as held:
            alice = [await held.enter_async_context(stream(port, "token-alice", n)) for n in (1, 2)]
            async with stream(port, "token-alice", 3) as third:
                assert await refusal(port, "token-alice", 4) == refused(
                    "max_listen_streams_per_principal"
                )
                bob = await held.enter_async_context(stream(port, "token-bob", 5))

                body, headers = mcp_request("tools/call", {"name": "announce", "arguments": {}})
                told = await request(port, body, [*headers, ("authorization", "Bearer token-bob")])
                assert told.status == 200
                assert told.messages[-1]["result"]["content"][0]["text"] == "4 streams told"
                for connection in (*alice, third, bob):
                    changed = await connection.next_message()
                    assert changed["method"] == "notifications/tools/list_changed"

                await held.enter_async_context(stream(port, "token-bob", 6))  # the fifth
                assert await refusal(port, "token-bob", 7) == refused("max_listen_streams")

            # Alice closed her third stream. The server notices the closed connection on its
            # own time; until it has, the place is still held, and the refusal says so.
            waiting = [refused("max_listen_streams"), refused("max_listen_streams_per_principal")]
            request_id = 8
            while (answer := await listen_once(port, "token-alice", request_id)) is not None:
                assert answer in waiting
                request_id += 1
                await trio.sleep(0.05)


async def listen_once(port: int, token: str, request_id: int) -> tuple[int, dict[str, Any]] | None:
    """None when a listen stream opens (its acknowledgement read, then closed), else the
    refusal's HTTP status and its error without the message."""
    async with open_exchange(port, *listen_request(token, request_id)) as connection:
        if connection.status == 200:
            assert (await connection.next_message())["method"] == ACK
            return None
        body = b""
        while (chunk := await connection.chunk()) is not None:
            body += chunk
    error: dict[str, Any] = json.loads(body)["error"]
    assert isinstance(error.pop("message"), str)
    return connection.status, error
