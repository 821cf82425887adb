"""``RemoteClient``: the schema-checking test client of ``presa_trio.testing``, for any MCP
server, over Streamable HTTP or a spawned process's stdio, in either era.

It negotiates as the ``presa-trio`` command line client does (``server/discover`` first; an
``initialize`` session when the server is older, or the version a test forces), checks every
message both ways against the vendored schema of the negotiated version (``checks``), and
answers the server's questions (2026-07-28 ``input_required`` rounds, an older server's
pushed elicitation, sampling, roots and ping) through one ``answer(key, request)``. It bounds
the waits it owns (the handshake, the end of a session); a request waits as long as the test
lets it (``trio.fail_after``). It checks Tasks-extension messages but does not poll tasks by
itself, reconnect or retry.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, final

import trio

from .._asgi_driver import RpcError, SchemaViolationError
from .._protocol.dialect import PROTOCOL_VERSION
from .._protocol.era import LEGACY_VERSIONS
from .._protocol.schema import Violation
from .._tool_outputs import ToolOutputs
from .checks import CHECKED_VERSIONS, MessageChecks
from .transports import Reply, Transport, TransportError
from .wire import (
    Era,
    ProtocolError,
    era_from_discover,
    http_headers,
    initialize_params,
    kind_of,
    legacy_request,
    modern_request,
    notification,
    refusal,
    reply,
    retry_params,
)

Answer = Callable[[str, dict[str, Any]], Any]

DEFAULT_CAPABILITIES: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
#: Seconds for the opening handshake (discover, or initialize and initialized) as a whole.
HANDSHAKE_TIMEOUT = 30.0
#: Seconds an unanswered ``server/discover`` waits before the client tries ``initialize``:
#: an older stdio server may never answer a method it does not know.
PROBE_SECONDS = 10.0
#: Seconds the ``DELETE`` that ends an older-era HTTP session may take, on the way out.
CLOSE_SECONDS = 5.0


def _raise_violations(found: list[Violation], what: str = "") -> None:
    if found:
        prefix = f"{what}: " if what else ""
        raise SchemaViolationError(prefix + "\n".join(str(v) for v in found))


@final
class RemoteClient:
    """A test client of a server at a URL or in a spawned process; make it with
    ``presa_trio.testing.open_http`` or ``open_stdio``.

    After the handshake, ``version`` is the negotiated protocol version (``2026-07-28``, or
    the ``initialize`` era's), ``server`` the ``DiscoverResult`` or ``InitializeResult``,
    ``notifications`` every notification received so far, in order.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        capabilities: Mapping[str, Any] | None = None,
        client_info: Mapping[str, Any] | None = None,
        answer: Answer | None = None,
        validate: bool = True,
        strict: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.transport = transport
        self.capabilities = dict(DEFAULT_CAPABILITIES if capabilities is None else capabilities)
        self.client_info = dict(client_info or {"name": "presa-trio-testing", "version": "1"})
        #: Answers what the server asks (``answer(key, {"method", "params"})``, may be async).
        self.answer = answer
        self.validate = validate
        self.strict = strict
        self.extra_headers = [(k.lower(), v) for k, v in (headers or {}).items()]
        self.version = PROTOCOL_VERSION
        self.era = Era.MODERN
        self.session_id: str | None = None
        self.server: dict[str, Any] = {}
        self.notifications: list[dict[str, Any]] = []
        #: The HTTP status of the last response (200 on stdio).
        self.last_status = 0
        #: The tools of the last ``list_tools`` (their ``inputSchema`` gives ``Mcp-Param-*``).
        self.tools: dict[str, dict[str, Any]] = {}
        self._checks = MessageChecks(PROTOCOL_VERSION)
        self._outputs = ToolOutputs()
        self._ids = itertools.count(1)

    # ------------------------------------------------------------------ the handshake

    async def open(
        self,
        version: str | None = None,
        *,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        probe: float = PROBE_SECONDS,
    ) -> None:
        """Negotiate the era: ``version`` None picks 2026-07-28 when the server speaks it,
        else ``initialize`` with the newest older version; a version forces that one."""
        if version is not None and version not in CHECKED_VERSIONS:
            known = ", ".join(CHECKED_VERSIONS)
            raise ValueError(f"version must be one of {known}, not {version!r}")
        with trio.move_on_after(handshake_timeout):
            if version == PROTOCOL_VERSION:
                await self._discover(math.inf, forced=True)
            elif version is not None:
                await self._initialize(version, forced=True)
            elif not await self._discover(probe, forced=False):
                await self._initialize(LEGACY_VERSIONS[0], forced=False)
            return
        raise TransportError(f"the server did not finish the handshake in {handshake_timeout} s")

    async def _discover(self, probe: float, *, forced: bool) -> bool:
        """``server/discover``; True when the server speaks 2026-07-28. Unforced, a server
        that does not (an error, an HTTP 4xx, no answer within ``probe``) is older."""
        message = self.message("server/discover")
        self._check_out(message)
        answer: Reply | None = None
        with trio.move_on_after(probe):
            answer = await self._send_request(message, None, None)
        if answer is None:
            return False
        if answer.status in (401, 403):
            raise ProtocolError(f"the server wants authorization (HTTP {answer.status})")
        if not forced and era_from_discover(answer.status, answer.response) is not Era.MODERN:
            return False
        self.server = self._result(answer, message)
        return True

    async def _initialize(self, version: str, *, forced: bool) -> None:
        """An ``initialize`` session asking for ``version``; unforced, the server may agree
        on another older version this client has the schema of."""
        self.era, self.version = Era.LEGACY, version
        self._checks = MessageChecks(version)
        params = initialize_params(
            self.client_info, version=version, capabilities=self.capabilities
        )
        message = legacy_request(next(self._ids), "initialize", params)
        self._check_out(message)
        answer = await self._send_request(message, None, None)
        self.session_id = answer.session_id
        result = self._result(answer, message)
        agreed = result.get("protocolVersion")
        if agreed != version:
            if forced or agreed not in LEGACY_VERSIONS:
                raise ProtocolError(
                    f"asked for protocol version {version}, the server answered {agreed!r}"
                    f" (this client checks {', '.join(CHECKED_VERSIONS)})"
                )
            self.version = agreed
            self._checks = MessageChecks(agreed)
            self._result(answer, message)  # checked again, against the agreed version
        self.server = result
        await self.notify("notifications/initialized")

    async def close(self) -> None:
        """End an older-era HTTP session (``DELETE``), bounded and shielded."""
        await trio.lowlevel.checkpoint()
        if self.session_id is None:
            return
        with trio.move_on_after(CLOSE_SECONDS, shield=True):
            await self.transport.end_session(self._headers({}))

    # ------------------------------------------------------------------ the wire

    def message(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        capabilities: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        progress_token: str | int | None = None,
    ) -> dict[str, Any]:
        """A request of the negotiated era (2026-07-28: with this client's ``_meta``, which
        ``meta`` adds to; older: plain params)."""
        request_id = next(self._ids)
        if self.era is Era.LEGACY:
            return legacy_request(
                request_id, method, params, progress_token=progress_token, meta=meta
            )
        return modern_request(
            request_id,
            method,
            params,
            self.client_info,
            progress_token=progress_token,
            capabilities=self.capabilities if capabilities is None else capabilities,
            meta=meta,
        )

    def _headers(
        self, message: Mapping[str, Any], input_schema: Mapping[str, Any] | None = None
    ) -> list[tuple[str, str]]:
        headers = http_headers(
            message,
            self.era,
            session_id=self.session_id,
            # Every request after ``initialize`` names the agreed version (2025-06-18 on).
            legacy_version=self.version if self.server else None,
            input_schema=input_schema,
        )
        return headers + self.extra_headers

    def _check_out(self, message: Mapping[str, Any]) -> None:
        if self.validate:
            _raise_violations(self._checks.request(message))

    async def _send_request(
        self,
        message: dict[str, Any],
        input_schema: Mapping[str, Any] | None,
        answer: Answer | None,
    ) -> Reply:
        async def on_message(received: dict[str, Any]) -> None:
            await self._on_message(received, answer or self.answer)

        reply = await self.transport.request(
            message, self._headers(message, input_schema), on_message
        )
        self.last_status = reply.status
        return reply

    def _result(self, answer: Reply, request: Mapping[str, Any]) -> dict[str, Any]:
        """The result of ``answer`` once its response is checked; an error raises
        ``RpcError``."""
        method = request["method"]
        if answer.response is None:
            raise ProtocolError(
                f"the server answered {method} with HTTP {answer.status} and no response"
            )
        response = answer.response
        if self.validate:
            _raise_violations(self._checks.response(response, request))
        if "error" in response:
            error = response["error"] if isinstance(response["error"], Mapping) else {}
            raise RpcError({"code": error.get("code"), **error}, answer.status)
        result = response.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(f"the server answered {method} without a result object")
        return result

    async def _on_message(self, message: dict[str, Any], answer: Answer | None) -> None:
        """What arrives before a response: a notification is checked and kept; an older
        server's request is checked and answered; anything else is an error."""
        kind = kind_of(message)
        if kind == "notification":
            if self.validate:
                _raise_violations(self._checks.server_notification(message))
            self.notifications.append(message)
            await trio.lowlevel.checkpoint()
            return
        if kind == "response":
            raise ProtocolError(f"the server sent a response to no request it was asked: {message}")
        if self.validate:
            _raise_violations(self._checks.server_request(message))
        method = str(message.get("method"))
        if method == "ping":
            answered = reply(message["id"], {})
        elif answer is None:
            answered = refusal(message["id"], method)
        else:
            asked = {"method": method, "params": message.get("params") or {}}
            response = answer(str(message["id"]), asked)
            if isinstance(response, Awaitable):
                response = await response
            if not isinstance(response, Mapping):
                raise TypeError(f"answer() must return the result of {method}, got {response!r}")
            answered = reply(message["id"], response)
        if self.validate:
            _raise_violations(self._checks.answer(method, answered), "this client's answer")
        await self.transport.send(answered, self._headers(answered))

    # ------------------------------------------------------------------ requests

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        input_schema: Mapping[str, Any] | None = None,
        answer: Answer | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Send a request and return its result; a JSON-RPC error raises ``RpcError``.
        ``options``: ``capabilities=``, ``meta=``, ``progress_token=`` (see ``message``);
        ``answer`` answers what an older server pushes meanwhile (else the client's own)."""
        message = self.message(method, params, **options)
        self._check_out(message)
        reply = await self._send_request(message, input_schema, answer)
        return self._result(reply, message)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (checked as one of the client's)."""
        message = notification(method)
        if params is not None:
            message["params"] = dict(params)
        if self.validate:
            _raise_violations(self._checks.notification(message))
        await self.transport.send(message, self._headers(message))

    async def discover(self) -> dict[str, Any]:
        """``server/discover`` (2026-07-28 only)."""
        return await self.request("server/discover")

    async def ping(self) -> None:
        """``ping``; 2026-07-28 removed it, so there this sends ``server/discover``, the
        request every server of that version answers."""
        await self.request("ping" if self.era is Era.LEGACY else "server/discover")

    async def _list(self, method: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        for _ in range(100):  # a server that pages forever is cut off
            result = await self.request(method, params)
            items += list(result.get(key) or ())
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str):
                return items
            params = {"cursor": cursor}
        raise ProtocolError(f"{method} was still paging after 100 pages")

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool, page after page; kept for ``Mcp-Param-*`` headers and ``strict``."""
        tools = await self._list("tools/list", "tools")
        self.tools = {t["name"]: t for t in tools if isinstance(t.get("name"), str)}
        self._outputs.keep(tools)
        return tools

    async def list_resources(self) -> list[dict[str, Any]]:
        return await self._list("resources/list", "resources")

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        return await self._list("resources/templates/list", "resourceTemplates")

    async def list_prompts(self) -> list[dict[str, Any]]:
        return await self._list("prompts/list", "prompts")

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri})

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        answer: Answer | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return await self._with_rounds("prompts/get", params, answer, None, {})

    async def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``completion/complete``; its ``completion`` (``values``, ``total``, ``hasMore``)."""
        params: dict[str, Any] = {"ref": dict(ref), "argument": dict(argument)}
        if context is not None:
            params["context"] = dict(context)
        completion: dict[str, Any] = (await self.request("completion/complete", params))[
            "completion"
        ]
        return completion

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answer: Answer | None = None,
        progress_token: str | int | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Call a tool. ``answer`` (or the client's) answers what the server asks, in
        2026-07-28 rounds or an older server's pushed requests; with ``progress_token`` the
        server may report progress (in ``notifications``). Over HTTP in 2026-07-28, the
        ``Mcp-Param-*`` headers a tool's ``inputSchema`` declares are sent once the tools
        were listed (``list_tools``, or ``strict``). With ``strict``, an ``isError``
        result raises ``ToolError`` and structured content that breaks the tool's
        ``outputSchema`` raises ``OutputSchemaError``."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        options: dict[str, Any] = {"progress_token": progress_token, "meta": meta}
        schema = self.tools.get(name, {}).get("inputSchema")
        result = await self._with_rounds("tools/call", params, answer, schema, options)
        if self.strict:
            await self._outputs.check(name, result, self.list_tools)
        return result

    async def _with_rounds(
        self,
        method: str,
        params: dict[str, Any],
        answer: Answer | None,
        input_schema: Mapping[str, Any] | None,
        options: Mapping[str, Any],
        max_rounds: int = 10,
    ) -> dict[str, Any]:
        """A request whose ``input_required`` rounds (wire §10) are answered and retried;
        an older server's pushed requests are answered by ``answer`` in passing."""
        answer = answer or self.answer
        result = await self.request(
            method, params, input_schema=input_schema, answer=answer, **options
        )
        for _ in range(max_rounds):
            if result.get("resultType") != "input_required" or answer is None:
                return result
            responses: dict[str, Any] = {}
            for key, asked in (result.get("inputRequests") or {}).items():
                response = answer(key, asked)
                if isinstance(response, Awaitable):
                    response = await response
                responses[key] = response
            retry = retry_params(params, result, responses)
            result = await self.request(
                method, retry, input_schema=input_schema, answer=answer, **options
            )
        raise ProtocolError(f"{method} still asked for input after {max_rounds} rounds")
