"""Schema-checking MCP clients for tests: in process, over HTTP, over stdio.

``open_client`` drives a presa_trio server's ASGI app in process, no sockets, in the
stateless 2026-07-28 dialect (per-request ``_meta``, routing headers), answering MRTR rounds
for you; ``open_session`` opens the older era's ``initialize`` session on it; ``open_http``
and ``open_stdio`` open a client on any server, at a URL or in a process they spawn, in the
era the server speaks. Every message in both directions is checked against the vendored
schema of the negotiated version; a violation fails the test with ``SchemaViolationError``
naming the ``$def`` and the JSON pointer. With ``strict=True`` a tool's error result raises
``ToolError`` and structured content that breaks the tool's ``outputSchema`` raises
``OutputSchemaError``. These are test tools: they do not reconnect or retry, and a request
waits as long as the test lets it (wrap calls in ``trio.fail_after``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from os import PathLike
from typing import Any, final

import trio

from ._asgi_driver import Exchange, asgi_scope
from ._asgi_driver import HttpResult as HttpResult
from ._asgi_driver import RpcError as RpcError
from ._asgi_driver import SchemaViolationError as SchemaViolationError
from ._asgi_driver import Stream as Stream
from ._asgi_driver import drive as drive
from ._client.remote import HANDSHAKE_TIMEOUT, PROBE_SECONDS
from ._client.remote import Answer as RemoteAnswer
from ._client.remote import RemoteClient as RemoteClient
from ._client.transports import HttpTransport, open_spawned
from ._client.transports import TransportError as TransportError
from ._client.wire import ProtocolError as ProtocolError
from ._protocol.catalog import ExtensionCatalog
from ._protocol.dialect import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
)
from ._protocol.schema import Schemas, Violation, error_definition
from ._server import Server
from ._session_client import SessionClient as SessionClient
from ._session_client import open_session as open_session
from ._tool_outputs import OutputSchemaError as OutputSchemaError
from ._tool_outputs import ToolOutputs, list_all_tools
from ._transports.asgi import AsgiApp
from .errors import ToolError as ToolError

__all__ = [
    "Client",
    "HttpResult",
    "OutputSchemaError",
    "ProtocolError",
    "RemoteClient",
    "RpcError",
    "SchemaViolationError",
    "SessionClient",
    "Stream",
    "ToolError",
    "TransportError",
    "drive",
    "open_client",
    "open_http",
    "open_session",
    "open_stdio",
]

DEFAULT_CAPABILITIES: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

Answer = Callable[[str, Mapping[str, Any]], Any]


@final
class Client:
    """A stateless 2026-07-28 client bound to one app; every message schema-checked.

    ``token`` is a bearer token sent with every request (for an app with ``auth``). With
    ``strict``, ``call_tool`` raises ``ToolError`` for an ``isError`` result and
    ``OutputSchemaError`` for ``structuredContent`` that breaks the tool's ``outputSchema``
    (the first such call lists the tools once, and the client keeps their declarations).
    """

    def __init__(
        self,
        app: AsgiApp,
        *,
        capabilities: Mapping[str, Any] | None = None,
        client_info: Mapping[str, Any] | None = None,
        schemas: Schemas | None = None,
        validate: bool = True,
        token: str | None = None,
        strict: bool = False,
    ) -> None:
        self.app = app
        self.strict = strict
        self._outputs = ToolOutputs()
        # Sent as ``Authorization: Bearer`` on every request; change it to switch principals.
        self.token = token
        self.capabilities = dict(DEFAULT_CAPABILITIES if capabilities is None else capabilities)
        self.client_info = dict(client_info or {"name": "presa-trio-testing", "version": "1"})
        self.schemas = schemas if schemas is not None else app.dispatcher.schemas
        self.validate = validate
        self._next_id = 0
        self._requests = self.schemas.request_definitions()
        self._notifications = self.schemas.notification_definitions()
        self._tasks_catalog: ExtensionCatalog | None = None  # loaded at the first task message

    # ------------------------------------------------------------------ building

    def message(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        capabilities: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        request_id: int | str | None = None,
    ) -> dict[str, Any]:
        """A request with this client's ``_meta`` (``meta`` adds or replaces keys)."""
        self._next_id += 1
        body = dict(params or {})
        body["_meta"] = {
            META_PROTOCOL_VERSION: PROTOCOL_VERSION,
            META_CLIENT_CAPABILITIES: dict(
                self.capabilities if capabilities is None else capabilities
            ),
            META_CLIENT_INFO: self.client_info,
            **(meta or {}),
        }
        identifier = self._next_id if request_id is None else request_id
        return {"jsonrpc": "2.0", "id": identifier, "method": method, "params": body}

    def headers_for(self, message: Mapping[str, Any]) -> list[tuple[str, str]]:
        headers = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", message["params"]["_meta"][META_PROTOCOL_VERSION]),
            ("mcp-method", message["method"]),
        ]
        if self.token is not None:
            headers.append(("authorization", f"Bearer {self.token}"))
        route = self.app.dispatcher.routes.get(message["method"])
        name_param = route.name_param if route is not None else None
        if name_param is not None and isinstance(message["params"].get(name_param), str):
            headers.append(("mcp-name", message["params"][name_param]))
        return headers

    # ------------------------------------------------------------------ checking

    def _violations(self, definition: str, instance: object) -> None:
        if not self.validate:
            return
        found = self.schemas.violations(definition, instance)
        if found:
            raise SchemaViolationError("\n".join(str(v) for v in found))

    def _tasks(self) -> ExtensionCatalog:
        """The Tasks extension's (SEP-2663) catalog: its methods, results and notifications,
        the same rules every checker of presa_trio applies."""
        if self._tasks_catalog is None:
            self._tasks_catalog = ExtensionCatalog.load_tasks()
        return self._tasks_catalog

    def _raise(self, found: list[Violation]) -> None:
        if found and self.validate:
            raise SchemaViolationError("\n".join(str(v) for v in found))

    def check_outgoing(self, message: Mapping[str, Any]) -> None:
        method = message["method"]
        definition = self._requests.get(method)
        if definition is None and self.validate:
            extension = self._tasks().request_violations(message, self.schemas)
            if extension is not None:
                self._raise(extension)
                return
        self._violations(definition or "JSONRPCRequest", message)

    def check_incoming(self, message: dict[str, Any], method: str) -> None:
        if "method" in message:
            if "id" in message:
                raise SchemaViolationError(f"server sent a request on a {method} stream")
            name = message["method"]
            if name not in self._notifications and self.validate:
                extension = self._tasks().notification_violations(message)
                if extension is not None:
                    self._raise(extension)
                    return
            self._violations(self._notifications.get(name, "JSONRPCNotification"), message)
        elif "error" in message:
            self._violations(error_definition(message["error"].get("code")), message)
        else:
            self._violations("JSONRPCResultResponse", message)
            self._check_result(message["result"], method)

    def _check_result(self, result: dict[str, Any], method: str) -> None:
        kind = result.get("resultType")
        routed = self.app.dispatcher.routes.get(method)
        # this client declares the Tasks extension on its requests: a task result is typed
        extension = (
            self._tasks().result_violations(method, result, declared=True)
            if self.validate
            else None
        )
        if extension is not None:
            self._raise(extension)
        elif kind == "input_required":
            self._violations("InputRequiredResult", result)
        elif kind != "complete":
            self._violations("Result", result)  # a resultType that is not a string
            if self.validate:
                raise SchemaViolationError(
                    f"Result at /resultType: {kind!r} is neither complete, input_required nor "
                    "task (the Tasks extension's)"
                )
        elif routed is not None and routed.result_def:
            self._violations(routed.result_def, result)
        else:
            self._violations("Result", result)

    # ------------------------------------------------------------------ sending

    async def send(
        self, message: dict[str, Any], headers: list[tuple[str, str]] | None = None
    ) -> HttpResult:
        """POST one prepared message; returns the raw exchange (errors are not raised)."""
        self.check_outgoing(message)
        result = await drive(self.app, json.dumps(message), headers or self.headers_for(message))
        for received in result.messages:
            self.check_incoming(received, message["method"])
        return result

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Send a request and return its result; a JSON-RPC error raises ``RpcError``."""
        result = await self.send(self.message(method, params, **options))
        response = result.response
        if response is None:
            raise AssertionError(f"no JSON-RPC response to {method} (HTTP {result.status})")
        if "error" in response:
            raise RpcError(response["error"], result.status)
        self.last = result
        answer: dict[str, Any] = response["result"]
        return answer

    async def discover(self) -> dict[str, Any]:
        return await self.request("server/discover")

    async def list_tools(self) -> list[dict[str, Any]]:
        return list((await self.request("tools/list"))["tools"])

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answer: Answer | None = None,
        max_rounds: int = 10,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Call a tool; with ``answer``, MRTR rounds are answered and retried for you.

        ``answer(key, input_request)`` returns the response for one input request (it may be
        a coroutine function). ``input_responses``/``request_state`` send a retry by hand.
        """
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        if input_responses is not None:
            params["inputResponses"] = dict(input_responses)
        if request_state is not None:
            params["requestState"] = request_state
        result = await self._with_rounds("tools/call", params, answer, max_rounds, options)
        if self.strict:
            await self._outputs.check(name, result, lambda: list_all_tools(self.request))
        return result

    async def _with_rounds(
        self,
        method: str,
        params: dict[str, Any],
        answer: Answer | None,
        max_rounds: int,
        options: Mapping[str, Any],
    ) -> dict[str, Any]:
        result = await self.request(method, params, **options)
        for _ in range(max_rounds):
            if answer is None or result.get("resultType") != "input_required":
                return result
            responses: dict[str, Any] = {}
            for key, input_request in (result.get("inputRequests") or {}).items():
                response = answer(key, input_request)
                if isinstance(response, Awaitable):
                    response = await response
                responses[key] = response
            retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
            retry["inputResponses"] = responses
            if "requestState" in result:
                retry["requestState"] = result["requestState"]
            result = await self.request(method, retry, **options)
        raise AssertionError(f"{method} still input_required after {max_rounds} rounds")

    async def read_resource(self, uri: str, **options: Any) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri}, **options)

    async def list_resources(self) -> list[dict[str, Any]]:
        return list((await self.request("resources/list"))["resources"])

    async def list_prompts(self) -> list[dict[str, Any]]:
        return list((await self.request("prompts/list"))["prompts"])

    async def complete(
        self, ref: Mapping[str, Any], argument: Mapping[str, str], **options: Any
    ) -> dict[str, Any]:
        """``completion/complete``; its ``completion`` (``values``, ``total``, ``hasMore``)."""
        params = {"ref": dict(ref), "argument": dict(argument)}
        result = await self.request("completion/complete", params, **options)
        completion: dict[str, Any] = result["completion"]
        return completion

    async def ping(self) -> None:
        """2026-07-28 removed ``ping``: this sends ``server/discover``, which every server of
        that version answers (as ``RemoteClient.ping`` does in that era)."""
        await self.discover()

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        answer: Answer | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return await self._with_rounds("prompts/get", params, answer, 10, options)

    # ------------------------------------------------------------------ tasks (SEP-2663)

    def _with_tasks(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` for a request of the Tasks extension: unless the test chose the
        capabilities itself, this client's own plus the extension, which every task request
        needs (so a client opened with ``capabilities={...}`` still follows tasks)."""
        if "capabilities" not in options:
            extensions = {**self.capabilities.get("extensions", {}), TASKS_EXTENSION: {}}
            options["capabilities"] = {**self.capabilities, "extensions": extensions}
        return options

    async def create_task(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Any
    ) -> str:
        """Call a tool that must become a task; returns its ``taskId``. The request declares
        the Tasks extension besides this client's capabilities (unless ``capabilities=``)."""
        result = await self.call_tool(name, arguments or {}, **self._with_tasks(options))
        if result.get("resultType") != "task":
            raise AssertionError(f"{name} did not create a task: {result}")
        task_id: str = result["taskId"]
        return task_id

    async def get_task(self, task_id: str, **options: Any) -> dict[str, Any]:
        return await self.request("tasks/get", {"taskId": task_id}, **self._with_tasks(options))

    async def update_task(
        self, task_id: str, responses: Mapping[str, Any], **options: Any
    ) -> dict[str, Any]:
        params = {"taskId": task_id, "inputResponses": dict(responses)}
        return await self.request("tasks/update", params, **self._with_tasks(options))

    async def cancel_task(self, task_id: str, **options: Any) -> dict[str, Any]:
        params = {"taskId": task_id}
        return await self.request("tasks/cancel", params, **self._with_tasks(options))

    async def wait_task(
        self,
        task_id: str,
        statuses: tuple[str, ...] = ("completed", "failed", "cancelled"),
        *,
        poll: float = 0.01,
        **options: Any,
    ) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task reaches one of ``statuses`` (bound it yourself)."""
        while True:
            task = await self.get_task(task_id, **options)
            if task["status"] in statuses:
                return task
            await trio.sleep(poll)

    @asynccontextmanager
    async def stream(
        self, method: str, params: Mapping[str, Any] | None = None, **options: Any
    ) -> AsyncIterator[Stream]:
        """Send a request and read its response as it comes; leaving the block disconnects."""
        message = self.message(method, params, **options)
        self.check_outgoing(message)
        exchange = Exchange(json.dumps(message).encode())
        async with trio.open_nursery() as nursery:
            scope = asgi_scope("POST", self.app.path, self.headers_for(message))
            nursery.start_soon(self.app, scope, exchange.receive, exchange.send)
            try:
                yield Stream(exchange, lambda m: self.check_incoming(m, method))
            finally:
                exchange.disconnected.set()

    @asynccontextmanager
    async def listen(
        self, notifications: Mapping[str, Any], **options: Any
    ) -> AsyncIterator[Stream]:
        """Open a ``subscriptions/listen`` stream; leaving the block disconnects it. The
        request declares the Tasks extension besides this client's capabilities (unless
        ``capabilities=``), as task status notifications need it."""
        params = {"notifications": dict(notifications)}
        options = self._with_tasks(options)
        async with self.stream("subscriptions/listen", params, **options) as stream:
            yield stream


@asynccontextmanager
async def open_client(server: Server | AsgiApp, **options: Any) -> AsyncIterator[Client]:
    """Run ``server`` (a fresh runtime of it) and hand back a ``Client`` for it."""
    app = server if isinstance(server, AsgiApp) else server.asgi_app()
    async with app.lifespan():
        yield Client(app, **options)


# ---------------------------------------------------------------------------- any server


@asynccontextmanager
async def open_http(
    url: str,
    *,
    version: str | None = None,
    strict: bool = False,
    answer: RemoteAnswer | None = None,
    headers: Mapping[str, str] | None = None,
    capabilities: Mapping[str, Any] | None = None,
    client_info: Mapping[str, Any] | None = None,
    validate: bool = True,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
) -> AsyncIterator[RemoteClient]:
    """Open a schema-checking client of the MCP server at ``url`` (Streamable HTTP).

    Named as trio names what an ``async with`` owns (``open_tcp_stream``, ``open_process``),
    beside ``open_client`` (a server in this process), ``open_session`` (the older era's
    session on one) and ``open_stdio`` (a server in a process it starts).

    It negotiates as an MCP client does: 2026-07-28 when the server answers
    ``server/discover`` with it, else an ``initialize`` session with the newest version the
    server accepts; ``version`` forces one (``"2026-07-28"``, ``"2025-11-25"`` or
    ``"2025-06-18"``). ``strict`` raises a tool's error result and its ``outputSchema``
    violations; ``answer(key, request)`` answers what the server asks; ``headers`` go with
    every request (``{"Authorization": "Bearer ..."}``); ``capabilities`` and
    ``client_info`` are the client's (2026-07-28: in every request's ``_meta``);
    ``validate=False`` checks nothing. The handshake is bounded by ``handshake_timeout``
    seconds; an older era's session is ended (``DELETE``) on the way out. A server that
    cannot be reached raises ``TransportError``.
    """
    client = RemoteClient(
        HttpTransport(url),
        capabilities=capabilities,
        client_info=client_info,
        answer=answer,
        validate=validate,
        strict=strict,
        headers=headers,
    )
    try:
        await client.open(version, handshake_timeout=handshake_timeout)
        yield client
    finally:
        await client.close()


@asynccontextmanager
async def open_stdio(
    command: Sequence[str],
    *,
    version: str | None = None,
    strict: bool = False,
    answer: RemoteAnswer | None = None,
    cwd: str | PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    capabilities: Mapping[str, Any] | None = None,
    client_info: Mapping[str, Any] | None = None,
    validate: bool = True,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
    probe: float = PROBE_SECONDS,
) -> AsyncIterator[RemoteClient]:
    """Start ``command`` (a list of words, in ``cwd``, with ``env`` added to this process's
    environment) and open a schema-checking client of the MCP server it runs on its stdin
    and stdout.

    Named beside ``open_client`` and ``open_http``: a client of a server over stdio. It
    negotiates as ``open_http`` does and takes the same options; an older server that never
    answers ``server/discover`` is given ``initialize`` after ``probe`` seconds. The
    server's stderr is this process's. On the way out its input is closed, and it is killed
    if it has not exited 2 s later. A command that cannot start, or a server that exits,
    raises ``TransportError`` (with its exit status).
    """
    if isinstance(command, str):
        raise TypeError(
            f"command must be a list of words, like ['python', 'server.py']: {command!r}"
        )
    async with open_spawned(list(command), cwd=cwd, env=env) as transport:
        client = RemoteClient(
            transport,
            capabilities=capabilities,
            client_info=client_info,
            answer=answer,
            validate=validate,
            strict=strict,
        )
        await client.open(version, handshake_timeout=handshake_timeout, probe=probe)
        yield client
