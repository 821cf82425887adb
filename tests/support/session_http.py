"""An older-era session over real HTTP, every message on a fresh connection, to any of several
servers that share one store (as a load balancer spreads them)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from support.live_http import Connection, Response, open_exchange, request

VERSION = "2025-11-25"
JSON = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]


def session_headers(session_id: str) -> list[tuple[str, str]]:
    return [*JSON, ("mcp-session-id", session_id), ("mcp-protocol-version", VERSION)]


async def open_session(port: int, capabilities: dict[str, Any] | None = None) -> str:
    """``initialize`` on ``port``, then ``notifications/initialized``; the session id."""
    params = {
        "protocolVersion": VERSION,
        "capabilities": capabilities if capabilities is not None else {"elicitation": {}},
        "clientInfo": {"name": "workers-test", "version": "1"},
    }
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    answer = await request(port, json.dumps(body).encode(), JSON)
    assert answer.status == 200, answer
    session_id = answer.headers["mcp-session-id"]
    taken = await post(port, session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert taken.status == 202, taken
    return session_id


async def post(port: int, session_id: str, message: dict[str, Any]) -> Response:
    return await request(port, json.dumps(message).encode(), session_headers(session_id))


async def call(
    port: int, session_id: str, method: str, params: dict[str, Any], request_id: int | str = 1
) -> dict[str, Any]:
    """A request on the session; its final message (result or error)."""
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    answer = await post(port, session_id, message)
    assert answer.messages, answer
    final: dict[str, Any] = answer.messages[-1]
    return final


@asynccontextmanager
async def streaming(
    port: int, session_id: str, message: dict[str, Any] | None = None, method: str = "POST"
) -> AsyncIterator[Connection]:
    """A request (or, with no message, the GET stream) whose answer is read as it comes."""
    body = b"" if message is None else json.dumps(message).encode()
    async with open_exchange(port, body, session_headers(session_id), method) as connection:
        yield connection


@asynccontextmanager
async def resuming(port: int, session_id: str, last_event_id: str) -> AsyncIterator[Connection]:
    """The GET that resumes a stream after ``last_event_id``, read as it comes."""
    headers = [*session_headers(session_id), ("last-event-id", last_event_id)]
    async with open_exchange(port, b"", headers, "GET") as connection:
        yield connection


async def delete(port: int, session_id: str) -> int:
    answer = await request(port, b"", session_headers(session_id), "DELETE")
    return answer.status
