"""What is live of the older era's sessions on one worker, and how other workers reach it.

A session's requests may arrive at any worker, but what they act on is live in one: the
scope of a running request that ``notifications/cancelled`` names, and a tool waiting in
``ctx.input`` for the client's answer to a request pushed on its stream. Each worker keeps
its own here; a signal for one it does not hold goes to the others through the backend's
broadcast, the path ``tasks/update`` and ``tasks/cancel`` take, and the worker holding it acts.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, final

import trio

from .._backends.protocol import Backend
from .._boundary import error_boundary
from .._protocol.jsonrpc import RequestId, Response
from ..errors import CapacityExceeded
from .shares import Shares

logger = logging.getLogger("presa_trio")

TOPIC = "sessions"


@final
class SessionSignals:
    """This worker's running session requests and pending pushes (one per run)."""

    def __init__(
        self,
        backend: Backend,
        max_pending_pushes: int,
        max_pending_pushes_per_principal: int | None = None,
    ) -> None:
        self._backend = backend
        self._max_pending = max_pending_pushes
        self._principal_share = Shares(
            None,
            max_pending_pushes_per_principal,
            "max_pending_pushes",
            "Too many requests await answers",
        )
        self._running: dict[tuple[str, RequestId], trio.CancelScope] = {}
        self._pushes: dict[str, tuple[str, trio.MemorySendChannel[Response]]] = {}
        self._pending: dict[str, int] = {}  # pushes waiting, per session
        self._numbers = itertools.count(1)
        backend.on_broadcast(TOPIC, self._from_other_workers)

    # ------------------------------------------------------------------ running requests

    @contextmanager
    def running(self, session_id: str, request_id: RequestId) -> Iterator[trio.CancelScope]:
        """Run a session's request in the scope this yields, which a
        ``notifications/cancelled`` naming it cancels, from any worker."""
        key = (session_id, request_id)
        with trio.CancelScope() as scope:
            self._running[key] = scope
            try:
                yield scope
            finally:
                if self._running.get(key) is scope:
                    del self._running[key]

    async def cancel(self, session_id: str, request_id: RequestId) -> None:
        """Cancel the session's running request ``request_id``, wherever it runs; an
        unknown or finished one is ignored (as the spec says)."""
        if not self._cancel_here(session_id, request_id):
            await self._tell_others({"op": "cancel", "session": session_id, "id": request_id})
        else:
            await trio.lowlevel.checkpoint()

    def _cancel_here(self, session_id: str, request_id: object) -> bool:
        if not isinstance(request_id, int | str):
            return False
        scope = self._running.get((session_id, request_id))
        if scope is None:
            return False
        scope.cancel()
        return True

    # ------------------------------------------------------------------ pushed requests

    @contextmanager
    def push(
        self, session_id: str, principal: str = ""
    ) -> Iterator[tuple[str, trio.MemoryReceiveChannel[Response]]]:
        """A fresh id for a request pushed to the session's client, and where its answer
        arrives (from any worker). At most ``max_pending_pushes`` wait per session here,
        and ``max_pending_pushes_per_principal`` for all sessions of ``principal``."""
        waiting = self._pending.get(session_id, 0)
        if waiting >= self._max_pending:
            raise CapacityExceeded("max_pending_pushes", "Too many requests await this client")
        self._principal_share.take(principal)
        push_id = f"presa-{self._backend.worker_id}-{next(self._numbers)}"
        send, receive = trio.open_memory_channel[Response](1)
        self._pushes[push_id] = (session_id, send)
        self._pending[session_id] = waiting + 1
        try:
            with receive, self._backend.attention():
                yield push_id, receive
        finally:
            del self._pushes[push_id]
            left = self._pending[session_id] - 1
            if left:
                self._pending[session_id] = left
            else:
                del self._pending[session_id]
            self._principal_share.give_back(principal)

    async def answer(self, session_id: str, response: Response) -> None:
        """Hand the client's ``response`` to the push waiting for it, wherever it waits; an
        answer to no pending push is dropped."""
        if self._deliver(session_id, response):
            await trio.lowlevel.checkpoint()
            return
        body = {"result": response.result} if response.error is None else {"error": response.error}
        await self._tell_others({"op": "answer", "session": session_id, "id": response.id, **body})

    def _deliver(self, session_id: str, response: Response) -> bool:
        if not isinstance(response.id, str):
            return False
        found = self._pushes.get(response.id)
        if found is None or found[0] != session_id:  # another session's push: not its answer
            return False
        # Answered twice, or the wait just ended: the first answer stands.
        with contextlib.suppress(
            trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
        ):
            found[1].send_nowait(response)
        return True

    # ------------------------------------------------------------------ across workers

    async def _tell_others(self, body: Mapping[str, Any]) -> None:
        if not self._backend.shared:
            await trio.lowlevel.checkpoint()
            return
        with error_boundary("telling the other workers of a session signal", logger):
            await self._backend.broadcast(TOPIC, body)

    def _from_other_workers(self, body: Mapping[str, Any]) -> None:
        session_id, op = body.get("session"), body.get("op")
        if not isinstance(session_id, str):
            return
        if op == "cancel":
            self._cancel_here(session_id, body.get("id"))
        elif op == "answer" and isinstance(body.get("id"), str):
            self._deliver(session_id, Response(body["id"], body.get("result"), body.get("error")))
