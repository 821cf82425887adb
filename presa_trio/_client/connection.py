"""A client connection over any transport: the era chosen, requests sent, rounds answered,
tasks followed to their end.

It opens with a 2026-07-28 ``server/discover`` and falls back to an ``initialize`` session
when the answer shows an older server (``wire.era_from_discover``). It answers what a server
asks for (MRTR input requests, a task's ``input_required``, an older server's pushed
elicitation) through one ``Asker``, and reports progress, logs and task status through one
``report`` callback. It has no clock of its own: the caller bounds the whole run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import trio

from .transports import Reply, Transport
from .wire import (
    Era,
    ProtocolError,
    TaskView,
    describe_notification,
    era_from_discover,
    http_headers,
    initialize_params,
    kind_of,
    legacy_request,
    modern_request,
    notification,
    poll_seconds,
    refusal,
    reply,
    result_of,
    retry_params,
    task_view,
)

CLIENT_INFO = {"name": "presa-trio", "version": "1"}
MAX_ROUNDS = 10  # MRTR rounds of one request before the client gives up
PROBE_SECONDS = 10.0  # an older stdio server may not answer server/discover at all


class Asker(Protocol):
    async def answer(self, key: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """The answer (an ``ElicitResult``) to the input request ``request`` named ``key``."""
        ...


Report = Callable[[str], None]


class Connection:
    """One server, one era, for one command; make it with ``Connection.open``."""

    def __init__(self, transport: Transport, asker: Asker, report: Report) -> None:
        self.transport = transport
        self.asker = asker
        self.report = report
        self.era = Era.MODERN
        self.session_id: str | None = None
        self.legacy_version: str | None = None
        self.server: dict[str, Any] = {}
        #: The task being followed, if any (a timeout names it: it goes on on the server).
        self.task_id: str | None = None
        self._ids = itertools.count(1)

    @classmethod
    async def open(
        cls, transport: Transport, asker: Asker, report: Report, *, probe: float = PROBE_SECONDS
    ) -> Connection:
        """Connect: ``server/discover`` first; ``initialize`` when the server is older."""
        connection = cls(transport, asker, report)
        await connection._negotiate(probe)
        return connection

    async def close(self) -> None:
        """End an older-era session (bounded and shielded: it runs on the way out)."""
        await trio.lowlevel.checkpoint()
        if self.session_id is None:
            return
        with trio.move_on_after(2.0, shield=True):
            await self.transport.end_session(self._headers({}))

    # ------------------------------------------------------------------ the era

    async def _negotiate(self, probe: float) -> None:
        message = modern_request(next(self._ids), "server/discover", {}, CLIENT_INFO)
        answer: Reply | None = None
        with trio.move_on_after(probe):
            answer = await self.transport.request(message, self._headers(message), self._on_message)
        if answer is not None and answer.status in (401, 403):
            raise ProtocolError(_refused(answer.status))
        if answer is not None and era_from_discover(answer.status, answer.response) is Era.MODERN:
            assert answer.response is not None
            self.server = result_of(answer.response)
            return
        self.era = Era.LEGACY
        message = legacy_request(next(self._ids), "initialize", initialize_params(CLIENT_INFO))
        answer = await self.transport.request(message, self._headers(message), self._on_message)
        self.session_id = answer.session_id
        result = self._result(answer, "initialize")
        version = result.get("protocolVersion")
        if not isinstance(version, str):
            raise ProtocolError("the server's initialize result names no protocolVersion")
        self.legacy_version = version
        self.server = result
        initialized = notification("notifications/initialized")
        await self.transport.send(initialized, self._headers(initialized))

    def _headers(
        self, message: Mapping[str, Any], input_schema: Mapping[str, Any] | None = None
    ) -> list[tuple[str, str]]:
        return http_headers(
            message,
            self.era,
            session_id=self.session_id,
            legacy_version=self.legacy_version,
            input_schema=input_schema,
        )

    # ------------------------------------------------------------------ requests

    def _result(self, answer: Reply, method: str) -> dict[str, Any]:
        if answer.response is None and answer.status in (401, 403):
            raise ProtocolError(_refused(answer.status))
        if answer.response is None:
            raise ProtocolError(
                f"the server answered {method} with HTTP {answer.status} and no response"
            )
        return result_of(answer.response)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        input_schema: Mapping[str, Any] | None = None,
        progress: bool = False,
    ) -> dict[str, Any]:
        """One request and its result; a JSON-RPC error raises ``ServerError``."""
        request_id = next(self._ids)
        token = f"presa-trio-{request_id}" if progress else None
        if self.era is Era.MODERN:
            message = modern_request(request_id, method, params, CLIENT_INFO, progress_token=token)
        else:
            message = legacy_request(request_id, method, params, progress_token=token)
        answer = await self.transport.request(
            message, self._headers(message, input_schema), self._on_message
        )
        return self._result(answer, method)

    async def _on_message(self, message: dict[str, Any]) -> None:
        """What arrives before a response: progress and logs are reported; an older-era
        server's elicitation is answered; any other request of it is refused."""
        if kind_of(message) == "notification":
            line = describe_notification(message)
            if line is not None:
                self.report(line.text)
            await trio.lowlevel.checkpoint()
            return
        method = message.get("method", "")
        if method == "elicitation/create" and self.era is Era.LEGACY:
            asked = {"method": method, "params": message.get("params") or {}}
            answered = reply(message["id"], await self.asker.answer(str(message["id"]), asked))
        else:
            answered = refusal(message["id"], str(method))
        await self.transport.send(answered, self._headers(answered))

    async def list_all(self, method: str, key: str) -> list[dict[str, Any]]:
        """Every item of a paginated list (``tools/list`` and the like)."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        for _ in range(1000):  # a server that pages forever is cut off
            result = await self.request(method, params)
            page = result.get(key)
            if not isinstance(page, list):
                raise ProtocolError(f"the {method} result has no {key} list")
            items += [item for item in page if isinstance(item, dict)]
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str):
                return items
            params = {"cursor": cursor}
        raise ProtocolError(f"{method} kept paging")

    async def with_rounds(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        input_schema: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A request whose ``input_required`` rounds (MRTR, wire §10) are answered through
        the asker and retried, and whose task (SEP-2663) is followed to its end; the final
        result."""
        result = await self.request(method, params, input_schema=input_schema, progress=True)
        for _ in range(MAX_ROUNDS):
            kind = result.get("resultType")
            if kind == "task":
                return await self.follow_task(task_view(result))
            if kind != "input_required":
                return result
            responses = await self._answers(result.get("inputRequests") or {})
            retry = retry_params(params, result, responses)
            result = await self.request(method, retry, input_schema=input_schema, progress=True)
        raise ProtocolError(f"{method} still asked for input after {MAX_ROUNDS} rounds")

    async def _answers(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        responses = {}
        for key, asked in requests.items():
            if not isinstance(asked, Mapping) or asked.get("method") != "elicitation/create":
                what = asked.get("method") if isinstance(asked, Mapping) else asked
                raise ProtocolError(
                    f"the server asked for {what}, which this client does not answer"
                )
            responses[key] = await self.asker.answer(key, asked)
        return responses

    async def follow_task(self, view: TaskView) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task ends, answering its questions (``tasks/update``);
        its ``CallToolResult``, or ``TaskEnded`` for a task that failed or was cancelled."""
        await trio.lowlevel.checkpoint()
        self.task_id = view.task_id
        shown: tuple[str, str | None] | None = None
        answered: set[str] = set()
        while True:
            if (view.status, view.status_message) != shown:
                shown = (view.status, view.status_message)
                extra = f": {view.status_message}" if view.status_message else ""
                self.report(f"task {view.task_id} {view.status}{extra}")
            if view.status == "completed":
                if view.result is None:
                    raise ProtocolError(f"task {view.task_id} completed without a result")
                return view.result
            if view.terminal:
                raise TaskEnded(view)
            pending = {k: v for k, v in view.input_requests.items() if k not in answered}
            if view.status == "input_required" and pending:
                responses = await self._answers(pending)
                answered |= set(responses)
                await self.request(
                    "tasks/update", {"taskId": view.task_id, "inputResponses": responses}
                )
            else:
                await trio.sleep(poll_seconds(view))
            view = task_view(await self.request("tasks/get", {"taskId": view.task_id}))


def _refused(status: int) -> str:
    return f"the server wants authorization (HTTP {status}), which this client does not send"


class TaskEnded(Exception):
    """A task that failed or was cancelled (its ``TaskView`` says how)."""

    def __init__(self, view: TaskView) -> None:
        error = view.error or {}
        why = f": {error.get('code')} {error.get('message', '')}" if error else ""
        super().__init__(f"task {view.task_id} {view.status}{why}")
        self.view = view
