"""The yardstick of ``bench/folded_app.py`` makes the checks it claims to make: the
benchmark's request is answered as presa answers it, and each check refuses what it is for.
Without these, a yardstick that skipped a check would make presa's structure look dearer."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from bench import asgi_profile, folded_app
from bench.http_bench import request_body

BODY = request_body("test_simple_text").encode()
HEADERS = {**dict(asgi_profile.HEADERS), b"mcp-name": b"test_simple_text"}  # as it sends them


async def exchange(
    body: bytes, headers: dict[bytes, bytes], path: str = "/mcp", chunk: int = 0
) -> tuple[int, bytes]:
    """One request through the app: its status and body (``chunk``: the body in pieces)."""
    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    messages = [
        {"type": "http.request", "body": piece, "more_body": i < len(pieces) - 1}
        for i, piece in enumerate(pieces)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "headers": list(headers.items())}
    await folded_app.app(scope, receive, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    return sent[0]["status"], sent[1]["body"]


async def test_the_benchmark_request_is_answered_as_presa_answers_it() -> None:
    for chunk in (0, 7):
        status, body = await exchange(BODY, HEADERS, chunk=chunk)
        assert status == 200
        assert json.loads(body) == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "resultType": "complete",
                "content": [{"type": "text", "text": folded_app.test_simple_text()}],
                "_meta": folded_app.SERVER_INFO,
            },
        }


def _call(**changes: Any) -> bytes:
    message = json.loads(BODY)
    message["params"].update(changes)
    return json.dumps(message).encode()


META = json.loads(BODY)["params"]["_meta"]


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (BODY, {**HEADERS, b"host": b"evil.example"}, 403),
        (BODY, {**HEADERS, b"origin": b"http://127.0.0.1:3200"}, 403),
        (BODY, {**HEADERS, b"accept": b"application/json"}, 406),
        (BODY, {**HEADERS, b"content-type": b"text/plain"}, 415),
        (b'{"jsonrpc": "2.0", "id": 1, ', HEADERS, 400),
        (_call(arguments=[]), HEADERS, 400),
        (
            _call(_meta={**META, "io.modelcontextprotocol/protocolVersion": "2025-06-18"}),
            HEADERS,
            400,
        ),
        (BODY, {**HEADERS, b"mcp-protocol-version": b"2025-06-18"}, 400),
        (_call(_meta={**META, "io.modelcontextprotocol/clientInfo": "me"}), HEADERS, 400),
        (BODY, {**HEADERS, b"mcp-method": b"tools/list"}, 400),
        (BODY, {**HEADERS, b"mcp-name": b"other"}, 400),
        (_call(name="other"), {**HEADERS, b"mcp-name": b"other"}, 400),
        (_call(arguments={"unexpected": 1}), HEADERS, 200),  # no additionalProperties: false
    ],
)
async def test_each_check_refuses_what_it_is_for(
    body: bytes, headers: dict[bytes, bytes], status: int
) -> None:
    assert (await exchange(body, headers))[0] == status


async def test_too_large_a_body_and_another_path_are_refused() -> None:
    assert (await exchange(b" " * (folded_app.MAX_BODY + 1), HEADERS, chunk=1 << 20))[0] == 413
    assert (await exchange(BODY, HEADERS, path="/other"))[0] == 404
