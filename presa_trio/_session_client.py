"""``SessionClient``: the older era's client for tests (``presa_trio.testing``).

It opens an ``initialize`` session (2025-11-25 or 2025-06-18) on an app in process, sends
every request with ``Mcp-Session-Id`` and ``MCP-Protocol-Version``, answers the requests a
tool pushes on its stream (sampling, elicitation, roots) through the same ``answer(key,
request)`` callback the 2026-07-28 ``Client`` uses for MRTR rounds, and checks every message
against the negotiated version's schema. So one test can run a tool under both eras.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, final

import trio

from ._asgi_driver import Exchange, RpcError, SchemaViolationError, Stream, asgi_scope, drive
from ._protocol.era import LEGACY_VERSIONS, SESSION_HEADER, result_definition
from ._protocol.schema import Schemas, load_document
from ._tool_outputs import ToolOutputs, list_all_tools
from ._transports.asgi import AsgiApp

Answer = Callable[[str, dict[str, Any]], Any]

#: How many times one request's stream may be resumed before the client gives up.
MAX_RESUMES = 5

#: The ``$def`` of each request a server may push, and of its answer.
_PUSHED = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "roots/list": "ListRootsRequest",
}


@final
class SessionClient:
    """An ``initialize`` session on ``app``; make it with ``open_session``.

    With ``strict``, ``call_tool`` raises ``ToolError`` for an ``isError`` result and
    ``OutputSchemaError`` for ``structuredContent`` that breaks the tool's ``outputSchema``
    (the first such call lists the tools once, and the client keeps their declarations).
    """

    def __init__(
        self,
        app: AsgiApp,
        *,
        version: str = LEGACY_VERSIONS[0],
        capabilities: Mapping[str, Any] | None = None,
        client_info: Mapping[str, Any] | None = None,
        answer: Answer | None = None,
        token: str | None = None,
        validate: bool = True,
        strict: bool = False,
    ) -> None:
        self.app = app
        self.strict = strict
        self._outputs = ToolOutputs()
        self.version = version
        self.capabilities = dict(
            {"elicitation": {}, "sampling": {}, "roots": {}}
            if capabilities is None
            else capabilities
        )
        self.client_info = dict(client_info or {"name": "presa-trio-testing", "version": "1"})
        #: Answers the requests a tool pushes (``answer(push id, {"method", "params"})``).
        self.answer = answer
        self.token = token
        self.validate = validate
        self.schemas = Schemas(load_document(version))
        self._requests = self.schemas.request_definitions()
        self.session_id: str | None = None
        self.initialize_result: dict[str, Any] = {}
        #: Every notification received, in order, on any of this session's responses.
        self.notifications: list[dict[str, Any]] = []
        #: The id of the last event seen on a resumable stream, and how many times a
        #: stream was resumed with it.
        self.last_event_id: str | None = None
        self.resumed = 0
        self._next_id = 0

    # ------------------------------------------------------------------ the wire

    def headers(self) -> list[tuple[str, str]]:
        headers = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ]
        if self.session_id is not None:
            headers += [(SESSION_HEADER, self.session_id), ("mcp-protocol-version", self.version)]
        if self.token is not None:
            headers.append(("authorization", f"Bearer {self.token}"))
        return headers

    def _check(self, definition: str, instance: object) -> None:
        if not self.validate:
            return
        found = self.schemas.violations(definition, instance)
        if found:
            raise SchemaViolationError("\n".join(str(v) for v in found))

    async def post(self, message: Mapping[str, Any]) -> tuple[int, dict[str, str], bytes]:
        """POST one message and read the whole answer: status, headers, body."""
        result = await drive(self.app, json.dumps(message), self.headers())
        return result.status, result.headers, result.body

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        """Send a notification; the HTTP status it got (202 when taken)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        status, _, _ = await self.post(message)
        return status

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send a request on the session and return its result, answering pushed requests
        and collecting notifications on the way; a JSON-RPC error raises ``RpcError``. A
        stream that ends before its response, having named an event, is resumed as the
        2025-11-25 transport says: a GET with ``Last-Event-ID`` (``resumed`` counts them)."""
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        self._check(self._requests.get(method, "JSONRPCRequest"), message)
        exchange = Exchange(json.dumps(message).encode())
        scope = asgi_scope("POST", self.app.path, self.headers())
        async with trio.open_nursery() as nursery:  # the POST's call may outlive its stream
            for _ in range(MAX_RESUMES + 1):
                nursery.start_soon(self.app, scope, exchange.receive, exchange.send)
                try:
                    final, status = await self._read(exchange, message["id"], method)
                finally:
                    exchange.disconnected.set()
                if final is not None:
                    break
                self.resumed += 1
                exchange, scope = Exchange(b""), self._resumption()
            else:
                raise EOFError(f"the {method} stream was resumed {MAX_RESUMES} times in vain")
        return self._final(final, status, method, message.get("params"))  # raised here

    def _resumption(self) -> dict[str, Any]:
        """The GET that resumes the stream whose last event seen is ``last_event_id``."""
        assert self.last_event_id is not None
        headers = [(k, v) for k, v in self.headers() if k != "content-type"]
        headers.append(("last-event-id", self.last_event_id))
        return asgi_scope("GET", self.app.path, headers)

    async def _read(
        self, exchange: Exchange, request_id: int, method: str
    ) -> tuple[dict[str, Any] | None, int]:
        """The response to ``request_id`` and the HTTP status, once pushed requests on the
        way are answered and notifications collected; None for a stream that ended first
        after naming an event (it can be resumed)."""
        await exchange.started.wait()
        if exchange.headers.get("mcp-session-id") and method == "initialize":
            self.session_id = exchange.headers["mcp-session-id"]
        buffer = b""
        streaming = exchange.headers.get("content-type", "").startswith("text/event-stream")
        if not streaming:
            body = b"".join([chunk async for chunk in exchange.chunks])
            return json.loads(body), exchange.status
        named = False
        while True:
            await trio.lowlevel.checkpoint()
            while b"\n\n" not in buffer:
                try:
                    buffer += await exchange.chunks.receive()
                except trio.EndOfChannel:
                    if named:
                        return None, exchange.status
                    raise EOFError(f"the {method} stream ended without its response") from None
            frame, buffer = buffer.split(b"\n\n", 1)
            data = []
            for line in frame.decode().splitlines():
                if line.startswith("id:"):
                    self.last_event_id, named = line[3:].strip(), True
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
            if not data or not data[0]:
                continue  # a keepalive comment, or the priming event
            event: dict[str, Any] = json.loads(data[0])
            if "method" in event and "id" in event:
                await self._answer_push(event)
            elif "method" in event:
                self.notifications.append(event)
            elif event.get("id") == request_id:
                return event, exchange.status

    def _final(
        self, message: dict[str, Any], status: int, method: str, params: Any = None
    ) -> dict[str, Any]:
        if "error" in message:
            raise RpcError(message["error"], status)
        result: dict[str, Any] = message["result"]
        definition = self._requests.get(method, "")
        answer_def = result_definition(
            definition.removesuffix("Request") + "Result", params or {}, result
        )
        if answer_def in self.schemas.definitions:
            self._check(answer_def, result)
        return result

    async def _answer_push(self, pushed: dict[str, Any]) -> None:
        self._check(_PUSHED.get(pushed["method"], "JSONRPCRequest"), pushed)
        if self.answer is None:
            reply: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": pushed["id"],
                "error": {"code": -32601, "message": "This test client answers no requests"},
            }
        else:
            request = {"method": pushed["method"], "params": pushed.get("params", {})}
            answered = self.answer(pushed["id"], request)
            if isinstance(answered, Awaitable):
                answered = await answered
            reply = {"jsonrpc": "2.0", "id": pushed["id"], "result": answered}
        status, _, body = await self.post(reply)
        if status != 202:
            raise AssertionError(f"the answer to {pushed['method']} got HTTP {status}: {body!r}")

    # ------------------------------------------------------------------ the session

    async def initialize(self) -> dict[str, Any]:
        """Open the session (``initialize``, then ``notifications/initialized``)."""
        params = {
            "protocolVersion": self.version,
            "capabilities": self.capabilities,
            "clientInfo": self.client_info,
        }
        result = await self.request("initialize", params)
        self.version = result["protocolVersion"]
        self.initialize_result = result
        status = await self.notify("notifications/initialized")
        if status != 202:
            raise AssertionError(f"notifications/initialized got HTTP {status}")
        return result

    @asynccontextmanager
    async def get_stream(self) -> AsyncIterator[Stream]:
        """Open the session's GET stream (list changes, updates of subscribed resources);
        leaving the block disconnects it."""
        exchange = Exchange(b"")
        headers = [(k, v) for k, v in self.headers() if k != "content-type"]
        async with trio.open_nursery() as nursery:
            scope = asgi_scope("GET", self.app.path, headers)
            nursery.start_soon(self.app, scope, exchange.receive, exchange.send)
            try:
                await exchange.started.wait()  # the answer has begun: ``status`` is known
                yield Stream(exchange, self._check_notification)
            finally:
                exchange.disconnected.set()

    def _check_notification(self, message: dict[str, Any]) -> None:
        definitions = self.schemas.notification_definitions()
        self._check(definitions.get(message.get("method", ""), "JSONRPCNotification"), message)

    async def close(self) -> int:
        """End the session (``DELETE``); the HTTP status."""
        result = await drive(self.app, b"", self.headers(), method="DELETE")
        return result.status

    # ------------------------------------------------------------------ methods

    async def list_tools(self) -> list[dict[str, Any]]:
        return list((await self.request("tools/list", {}))["tools"])

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answer: Answer | None = None,
        progress_token: str | int | None = None,
        task: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Call a tool; ``answer`` (or the client's own) answers what it pushes. With
        ``task`` (``{}`` or ``{"ttl": ms}``, 2025-11-25) the call asks to run as a task, and
        a tool that does answers its ``CreateTaskResult``."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        if task is not None:
            params["task"] = dict(task)
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        kept = self.answer
        if answer is not None:
            self.answer = answer
        try:
            result = await self.request("tools/call", params)
        finally:
            self.answer = kept
        if self.strict:
            await self._outputs.check(name, result, lambda: list_all_tools(self.request))
        return result

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri})

    async def list_resources(self) -> list[dict[str, Any]]:
        return list((await self.request("resources/list", {}))["resources"])

    async def list_prompts(self) -> list[dict[str, Any]]:
        return list((await self.request("prompts/list", {}))["prompts"])

    async def complete(self, ref: Mapping[str, Any], argument: Mapping[str, str]) -> dict[str, Any]:
        """``completion/complete``; its ``completion`` (``values``, ``total``, ``hasMore``)."""
        params = {"ref": dict(ref), "argument": dict(argument)}
        completion: dict[str, Any] = (await self.request("completion/complete", params))[
            "completion"
        ]
        return completion

    async def ping(self) -> None:
        await self.request("ping")

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return await self.request("prompts/get", params)


@asynccontextmanager
async def open_session(
    server: Any, *, version: str = LEGACY_VERSIONS[0], **options: Any
) -> AsyncIterator[SessionClient]:
    """Run ``server`` (or an ``AsgiApp``) and open an ``initialize`` session on it; the
    session is ended (``DELETE``) on the way out."""
    app = server if isinstance(server, AsgiApp) else server.asgi_app()
    async with app.lifespan():
        client = SessionClient(app, version=version, **options)
        await client.initialize()
        try:
            yield client
        finally:
            with trio.CancelScope(shield=True) as closing:
                closing.deadline = trio.current_time() + 5.0
                await client.close()
