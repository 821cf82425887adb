"""A hand-written MCP server that breaks the schema in one chosen way, for the tests of
``presa_trio.testing``: each ``BREAKS`` entry is the answer it gives, otherwise correct.

``python broken_server.py BREAK`` serves on stdin/stdout; ``broken_server:app`` is the same
server as an ASGI app (one message per POST), its break named by the path
(``http://127.0.0.1:PORT/BREAK``). Every break but ``old-*`` speaks 2026-07-28; ``old-*``
refuses ``server/discover`` as an older server does and serves an ``initialize`` session
(2025-11-25). The ``task-*`` breaks speak the Tasks extension: ``tools/call`` answers a task,
``tasks/get`` and ``tasks/cancel`` are answered. Over stdio, ``exit-on-call`` exits
(status 4) when a tool is called.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODERN = "2026-07-28"
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "broken", "version": "1"}}
DISCOVER = {
    "resultType": "complete",
    "supportedVersions": [MODERN],
    "capabilities": {"tools": {}},
    "ttlMs": 0,
    "cacheScope": "public",
    "_meta": SERVER_INFO,
}
LISTED = {"resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
TOOL = {"name": "echo", "inputSchema": {"type": "object"}}
TEXT = {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]}
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress"}
WHEN = "2026-11-03T18:04:05.123Z"
TASK = {"taskId": "t1", "status": "working", "createdAt": WHEN, "lastUpdatedAt": WHEN,
        "ttlMs": None}  # fmt: skip

# What each break answers to tools/call (a list: notifications first, then the result).
CALL_ANSWERS: dict[str, list[dict[str, Any]]] = {
    "is-error-type": [{**TEXT, "isError": "no"}],
    "content-not-a-list": [{"resultType": "complete", "content": "not a list"}],
    "result-type-typo": [{"resultType": "completed", "contents": []}],
    "task-undeclared": [{"resultType": "task", "taskId": "t1", "status": "working"}],
    "task-bogus": [{"resultType": "task", **TASK, "taskId": 17, "status": "bogus"}],
    "progress-type": [{**PROGRESS, "params": {"progressToken": "p", "progress": "half"}}, TEXT],
    "request-on-stream": [{"id": 99, "method": "roots/list"}, TEXT],
    "old-is-error-type": [{"content": [{"type": "text", "text": "hi"}], "isError": "no"}],
}

# The Tasks extension (SEP-2663): what each break answers to tasks/get and tasks/cancel
# ("*": every other break); tools/call answers a working task for the ``task-*`` breaks.
COMPLETED = {"resultType": "complete", **TASK, "status": "completed", "result": TEXT}
TASK_ANSWERS: dict[str, dict[str, list[dict[str, Any]]]] = {
    "tasks/get": {
        "*": [COMPLETED],
        "task-get-no-result": [{k: v for k, v in COMPLETED.items() if k != "result"}],
        "task-note-bogus": [
            {"method": "notifications/tasks", "params": {**TASK, "ttlMs": "x"}},
            COMPLETED,
        ],
    },
    "tasks/cancel": {
        "*": [{"resultType": "complete"}],
        "task-cancel-as-task": [{"resultType": "task", **TASK}],
    },
}
for _break in {name for found in TASK_ANSWERS.values() for name in found} - {"*"}:
    CALL_ANSWERS[_break] = [{"resultType": "task", **TASK}]


def answers(message: dict[str, Any], broken: str) -> list[dict[str, Any]]:
    """The messages the server sends for ``message``: zero or more, the response last."""
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:  # a notification, or a client's answer
        return []
    old = broken.startswith("old-")
    if method == "server/discover" and old:
        error = {"code": -32601, "message": "Method not found"}
        return [{"jsonrpc": "2.0", "id": request_id, "error": error}]
    if method == "server/discover":
        result: dict[str, Any] = DISCOVER
    elif method == "initialize":
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "broken", "version": "1"},
        }
        if broken == "old-initialize-no-info":
            del result["serverInfo"]
    elif method == "tools/list":
        result = {"tools": [TOOL]} if old else {**LISTED, "tools": [TOOL]}
    elif method in TASK_ANSWERS:
        *sent, result = TASK_ANSWERS[method].get(broken, TASK_ANSWERS[method]["*"])
        return [{"jsonrpc": "2.0", **m} for m in sent] + [
            {"jsonrpc": "2.0", "id": request_id, "result": result}
        ]
    elif method == "tools/call":
        *sent, result = CALL_ANSWERS.get(broken, [TEXT])
        return [{"jsonrpc": "2.0", **m} for m in sent] + [
            {"jsonrpc": "2.0", "id": request_id, "result": result}
        ]
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return [{"jsonrpc": "2.0", "id": request_id, "error": error}]
    return [{"jsonrpc": "2.0", "id": request_id, "result": result}]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The same server over HTTP: each POSTed message gets its answers, as an SSE stream
    when there are several, else one JSON body; a POSTed notification gets 202."""
    if scope["type"] == "lifespan":
        while True:
            event = await receive()
            await send({"type": event["type"] + ".complete"})
            if event["type"] == "lifespan.shutdown":
                return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    sent = answers(json.loads(body) if body else {}, scope["path"].strip("/"))
    if not sent:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if len(sent) == 1:
        kind, payload = b"application/json", json.dumps(sent[0]).encode()
    else:
        kind = b"text/event-stream"
        payload = b"".join(b"data: " + json.dumps(m).encode() + b"\n\n" for m in sent)
    headers = [(b"content-type", kind), (b"mcp-session-id", b"s1")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def main() -> None:
    broken = sys.argv[1]
    for line in sys.stdin:
        if line.strip():
            message = json.loads(line)
            if broken == "exit-on-call" and message.get("method") == "tools/call":
                sys.exit(4)
            for sent in answers(message, broken):
                print(json.dumps(sent), flush=True)


if __name__ == "__main__":
    main()
