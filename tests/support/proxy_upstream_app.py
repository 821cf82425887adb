"""A small MCP-shaped ASGI app that misbehaves on request, for the proxy's tests (served by
hypercorn's trio worker: ``proxy_upstream_app:app``).

A ``tools/call`` picks what happens by the tool's name (its progress notifications carry the
request's ``progressToken``):

- ``bad_content``: a complete result whose ``content`` is a string, not a list;
- ``bad_progress``: an SSE stream with a ``notifications/progress`` whose ``progress`` is a
  string, then nothing until the client leaves;
- ``server_request``: an SSE stream carrying a request from the server (2026-07-28 forbids
  them), then the answer;
- ``stray``: a result to id 999, which nobody sent;
- ``bad_status``: a valid result, with status 500;
- ``not_json``: ``application/json`` that is not JSON;
- ``wait``: an SSE stream with one valid progress notification, then nothing until the client
  leaves; the disconnect is printed (``upstream saw the client leave: ID``) on stdout;
- ``break``: an SSE stream with one valid progress notification, then the connection is
  broken (the app raises);
- ``secret``: 401 with a ``WWW-Authenticate`` challenge unless an ``Authorization`` came;
- ``headers``: a valid result whose text is the request headers the app saw, as JSON.

A GET opens a resumable stream: a priming event (an id and empty data), one logging
notification with an id, then the stream ends. It echoes ``last-event-id`` in a header.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import trio

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
JSON = [(b"content-type", b"application/json")]


def result(request_id: Any, text: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    body = {"resultType": "complete", "content": content}
    return {"jsonrpc": "2.0", "id": request_id, "result": body}


def event(message: dict[str, Any], event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: message\ndata: {json.dumps(message)}\n\n".encode()


def progress(value: Any, token: Any) -> dict[str, Any]:
    params = {"progressToken": token, "progress": value, "total": 2}
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    if scope["method"] == "GET":
        await _get_stream(headers, send)
        return
    request = json.loads(body)
    name = request.get("params", {}).get("name")
    request_id = request.get("id")
    token = request.get("params", {}).get("_meta", {}).get("progressToken")
    if name == "bad_content":
        broken = {"resultType": "complete", "content": "not a list"}
        await _json(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": broken})
    elif name == "bad_progress":
        await _stream(send, [progress("half", token)])
        await _until_gone(receive, request_id)
    elif name == "server_request":
        ask = {"jsonrpc": "2.0", "id": 50, "method": "roots/list", "params": {}}
        await _stream(send, [ask, result(request_id, "done")], more=False)
    elif name == "stray":
        await _json(send, 200, result(999, "to nobody"))
    elif name == "bad_status":
        await _json(send, 500, result(request_id, "fine, but 500"))
    elif name == "not_json":
        await _raw(send, 200, JSON, b"oops, not JSON")
    elif name == "break":
        await _stream(send, [progress(1, token)])
        raise RuntimeError("the upstream breaks its stream on purpose")
    elif name == "wait":
        await _stream(send, [progress(1, token)])
        await _until_gone(receive, request_id)
    elif name == "secret" and "authorization" not in headers:
        challenge = (
            b'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"'
        )
        await _raw(send, 401, [(b"www-authenticate", challenge)], b"")
    elif name == "headers":
        await _json(
            send, 200, result(request_id, json.dumps(headers)), ((b"mcp-session-id", b"s-1"),)
        )
    else:
        await _json(send, 200, result(request_id, "ok"))


async def _get_stream(headers: dict[str, str], send: Send) -> None:
    echo = [(b"x-last-event-id", headers.get("last-event-id", "").encode())]
    await send({"type": "http.response.start", "status": 200, "headers": SSE + echo})
    log = {"jsonrpc": "2.0", "method": "notifications/message",
           "params": {"level": "info", "data": "hello"}}  # fmt: skip
    for chunk in (b"id: e-0\nretry: 1000\ndata: \n\n", event(log, "e-1")):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _stream(send: Send, messages: list[dict[str, Any]], *, more: bool = True) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": SSE})
    for message in messages:
        await send({"type": "http.response.body", "body": event(message), "more_body": True})
    if not more:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _until_gone(receive: Receive, request_id: Any) -> None:
    with trio.move_on_after(120):  # a bound for a test that failed to leave
        while (await receive())["type"] != "http.disconnect":
            pass
        print(f"upstream saw the client leave: {request_id}", flush=True)


async def _json(
    send: Send, status: int, message: dict[str, Any], extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    await _raw(send, status, [*JSON, *extra], json.dumps(message).encode())


async def _raw(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
