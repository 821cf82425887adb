"""A yardstick, not a server: the benchmark's ``tools/call`` with presa's checks for it, folded
into one function.

Issue 12 asks presa to serve ``tools/call`` at 0.90x the raw app with at most 1.12x its CPU.
This app shows what that leaves for a library's structure. For the benchmark's request it does
what presa does, in the same order and with presa's own parts where the work is the same: the
path and method; Host and Origin (no Origin, a loopback Host); ``Accept`` and
``Content-Type``; the body, read whole under a size limit, inside a cancel scope (where presa
keeps the request's nursery); presa's strict JSON reader; the request against the vendored schema
(jsonschema-rs, as presa compiles it); the protocol version in ``_meta`` and in its header;
``Mcp-Method`` and ``Mcp-Name`` against the body; the client's capabilities and info as
objects; the tool looked up, its arguments checked against its input schema, the tool called;
the result with ``resultType`` and the server's info, written by presa's encoder with a
``Content-Length``.

What it leaves out is what a library is made of: extensions, the ``Context``, the request's
log context, a responder that can turn into a stream, error mapping beyond a plain refusal,
tracing, caching hints, MRTR, the disconnect watcher and the deadlines. Any refusal here is a
bare 4xx without a JSON-RPC body. ``bench/http_bench.py --folded on`` and
``bench/asgi_profile.py`` serve it beside presa and the raw app.
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import trio

from bench.raw_app import lifespan
from presa_trio._protocol.jsonrpc import decode_json, encode
from presa_trio._protocol.schema import Schemas
from presa_trio.errors import ParseError

PROTO = "2026-07-28"
MAX_BODY = 4 * 1024 * 1024
LOOPBACK = {b"127.0.0.1", b"localhost", b"[::1]"}
READ = {b"host", b"origin", b"accept", b"content-type"}
READ |= {b"mcp-protocol-version", b"mcp-method", b"mcp-name"}  # the headers it checks
REQUEST_IS_VALID = Schemas()._get("CallToolRequest").is_valid
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "folded", "version": "0.1.0"}}


def test_simple_text() -> str:
    return "This is a simple text response for testing."


TOOLS = {"test_simple_text": test_simple_text}
NO_ARGUMENTS = jsonschema_rs.validator_for({"type": "object", "properties": {}}).is_valid


async def refuse(send: Any, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    if scope["path"] != "/mcp" or scope["method"] != "POST":
        await refuse(send, 404)
        return
    headers = {key: value for key, value in scope["headers"] if key in READ}
    host, origin, accept = headers.get(b"host"), headers.get(b"origin"), headers.get(b"accept")
    content_type, version = headers.get(b"content-type"), headers.get(b"mcp-protocol-version")
    method, name = headers.get(b"mcp-method"), headers.get(b"mcp-name")
    if host is None or host.rsplit(b":", 1)[0] not in LOOPBACK or origin is not None:
        await refuse(send, 403)
        return
    if accept is None or b"application/json" not in accept or b"text/event-stream" not in accept:
        await refuse(send, 406)
        return
    if content_type is None or not content_type.startswith(b"application/json"):
        await refuse(send, 415)
        return
    with trio.CancelScope():
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                await refuse(send, 413)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        try:
            request: Any = decode_json(b"".join(chunks))
        except ParseError:
            await refuse(send, 400)
            return
        if not REQUEST_IS_VALID(request):
            await refuse(send, 400)
            return
        params = request["params"]
        meta = params.get("_meta") or {}
        capabilities = meta.get("io.modelcontextprotocol/clientCapabilities")
        info = meta.get("io.modelcontextprotocol/clientInfo")
        if (
            meta.get("io.modelcontextprotocol/protocolVersion") != PROTO
            or version != PROTO.encode()
            or type(capabilities) is not dict
            or type(info) is not dict
            or method != request["method"].encode()
            or name != params["name"].encode()
        ):
            await refuse(send, 400)
            return
        tool = TOOLS.get(params["name"])
        arguments = params.get("arguments") or {}
        if tool is None or not NO_ARGUMENTS(arguments):
            await refuse(send, 400)
            return
        content = [{"type": "text", "text": tool()}]  # it declares no parameters: none bound
        result = {"resultType": "complete", "content": content, "_meta": SERVER_INFO}
        data = encode({"jsonrpc": "2.0", "id": request["id"], "result": result})
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})
