"""Drive any MCP server with the test venv's ``mcp`` 2.x client, for captures.

``python capture_driver.py MODE TARGET CALLS``: MODE is ``legacy`` (the initialize handshake,
2025-11-25), ``2025-06-18`` (the handshake asking for that older revision) or ``auto`` (the
client's default: 2026-07-28 when the server speaks it). TARGET is JSON: ``{"command",
"args", "env", "cwd"}`` for a stdio server, or ``{"url", "capture"}`` for Streamable HTTP,
each exchange then recorded in the file ``capture`` by the client's own HTTP transport (see
``Recording``). CALLS is a JSON list of ``[tool, arguments]``. It lists the tools, makes each
call, lists and reads the resources, and prints what it saw as one JSON object.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio
import httpx2
import mcp.client.session
from mcp import Client, StdioServerParameters, types
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.simplefilter("ignore", MCPDeprecationWarning)
WAIT = 60.0  # seconds for the whole exercise (a bound, not a pace)


async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


class Recording(httpx2.AsyncBaseTransport):
    """An HTTP transport that writes each exchange to a capture as it passes: a client
    record per request, a server record per JSON response, per event of an event stream, or
    one without a message for a response with no body (the record format of ``presa-trio
    validate``)."""

    def __init__(self, path: str) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.out = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in aclose)
        self.exchanges = 0

    def write(self, record: dict[str, Any]) -> None:
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.exchanges += 1
        exchange = self.exchanges
        body = await request.aread()
        headers = {k.lower(): v for k, v in request.headers.items()}
        record: dict[str, Any] = {
            "direction": "client", "exchange": exchange,
            "http": {"method": request.method, "headers": headers},
        }  # fmt: skip
        if body:
            record["message"] = json.loads(body)
        self.write(record)
        response = await self.inner.handle_async_request(request)
        http = {
            "status": response.status_code,
            "headers": {k.lower(): v for k, v in response.headers.items()},
        }
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=Tee(response.stream, self, exchange, http),  # type: ignore[arg-type]
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
        self.out.close()


class Tee(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, owner: Recording, exchange: int, http: dict[str, Any]):
        self.inner, self.owner, self.exchange, self.http = inner, owner, exchange, http
        self.buffer = b""
        self.wrote = False
        self.stream = http["headers"].get("content-type", "").startswith("text/event-stream")

    def server(self, message: Any) -> None:
        self.wrote = True
        record = {"direction": "server", "exchange": self.exchange, "http": self.http}
        if message is not None:
            record["message"] = message
        self.owner.write(record)

    async def __aiter__(self) -> Any:
        async for chunk in self.inner:
            self.buffer += chunk
            while self.stream and b"\n\n" in self.buffer.replace(b"\r\n", b"\n"):
                self.buffer = self.buffer.replace(b"\r\n", b"\n")
                event, _, self.buffer = self.buffer.partition(b"\n\n")
                data = [
                    line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")
                ]
                if data and b"".join(data):
                    self.server(json.loads(b"\n".join(data)))
            yield chunk

    async def aclose(self) -> None:
        if not self.stream and self.buffer.strip():
            self.server(json.loads(self.buffer))
        elif not self.wrote and not self.stream:
            self.server(None)
        await self.inner.aclose()


PROBES = [("tools/cal", {}), ("resources/read", {"uri": "note://nowhere"})]


async def probe(http: httpx2.AsyncClient, url: str) -> list[int]:
    """2026-07-28 requests the server must refuse, posted as the SDK posts its own (an
    unknown method, an unknown resource): their statuses."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    statuses = []
    for number, (method, params) in enumerate(PROBES, start=900):
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": method,
        }
        if "uri" in params:
            headers["mcp-name"] = params["uri"]
        body = {"jsonrpc": "2.0", "id": number, "method": method,
                "params": {**params, "_meta": meta}}  # fmt: skip
        response = await http.post(url, json=body, headers=headers)
        await response.aread()
        statuses.append(response.status_code)
    return statuses


async def main(mode: str, target: dict[str, Any], calls: list[list[Any]]) -> dict[str, Any]:
    if mode == "2025-06-18":
        mcp.client.session.LATEST_HANDSHAKE_VERSION = mode  # type: ignore[misc]
        mode = "legacy"
    server: Any
    if "url" in target:
        http = httpx2.AsyncClient(transport=Recording(target["capture"]), timeout=WAIT)
        server = streamable_http_client(target["url"], http_client=http)
    else:
        server = StdioServerParameters(
            command=target["command"], args=target["args"], env=target.get("env"),
            cwd=target.get("cwd"),
        )  # fmt: skip
    seen: dict[str, Any] = {}
    with anyio.fail_after(WAIT):
        async with Client(server, mode=mode, elicitation_callback=elicit) as client:
            seen["protocol_version"] = client.protocol_version
            seen["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
            seen["calls"] = {}
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                seen["calls"][name] = {"is_error": result.is_error}
            resources = (await client.list_resources()).resources
            seen["resources"] = [str(resource.uri) for resource in resources]
            for resource in resources[:2]:
                await client.read_resource(resource.uri)
            if target.get("probe"):
                seen["probes"] = await probe(http, target["url"])
    return seen


if __name__ == "__main__":
    arguments = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    print(json.dumps(anyio.run(main, *arguments)))
