"""What the capture checker remembers between lines: the requests in flight (scoped by session
or connection), cancelled ids, live progress tokens, the negotiated versions, what the client
sent in each HTTP exchange, the sessions given, the tools and extensions declared.

Pure bookkeeping: it finds nothing itself; capture.py asks it and turns answers into findings.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

from .capture_records import CLIENT, SERVER, Record
from .catalog import Catalog
from .declared_tools import DeclaredTool
from .era import SESSION_HEADER

OTHER = {CLIENT: SERVER, SERVER: CLIENT}

#: Where ids are unique: ("session", id), ("conn", n), or None for the whole capture.
Scope = Any


def key(value: object) -> Hashable:
    """A request id (or progress token) as a key: ``1``, ``"1"`` and ``true`` stay apart."""
    kind = type(value)
    if kind is int or kind is str:
        return kind is int, value
    return json.dumps(value, sort_keys=True)


def scopes(record: Record) -> list[Scope]:
    """The scopes a line belongs to, narrowest first."""
    found: list[Scope] = []
    session = record.header(SESSION_HEADER)
    if session is not None:
        found.append(("session", session))
    if record.conn is not None:
        found.append(("conn", record.conn))
    found.append(None)
    return found


@dataclass(slots=True)
class InFlight:
    """A request seen and not yet answered."""

    method: str
    catalog: Catalog
    sender: str
    key: tuple[Scope, str, Hashable]
    tasks: bool  # its ``_meta`` client capabilities declare the Tasks extension
    params: dict[str, Any]
    token: Hashable | None  # its progress token, as a key
    exchange: Any
    request_id: Any


@dataclass(frozen=True, slots=True)
class Exchange:
    """What the client sent in one HTTP exchange."""

    kind: str  # "request" | "notification" | "response" | "other"
    catalog: Catalog
    session: str | None


@final
@dataclass
class Traffic:
    pending: dict[tuple[Scope, str, Hashable], InFlight] = field(default_factory=dict)
    by_id: dict[tuple[str, Hashable], list[InFlight]] = field(default_factory=dict)
    cancelled: set[tuple[str, Hashable]] = field(default_factory=set)  # (sender, id key)
    negotiated: dict[Scope, str] = field(default_factory=dict)
    sessions: dict[Any, str] = field(default_factory=dict)  # conn -> the session it was given
    exchanges: dict[Any, Exchange] = field(default_factory=dict)
    tokens: dict[Hashable, int] = field(default_factory=dict)  # token -> requests in flight
    lasting_tokens: set[Hashable] = field(default_factory=set)  # tokens of requests now tasks
    tools: dict[str, DeclaredTool] = field(default_factory=dict)
    server_tasks: bool = False  # a server/discover result declared the Tasks extension
    client_tasks: bool = False  # some request declared it

    # ------------------------------------------------------------------ requests

    def start(
        self,
        record: Record,
        message: Mapping[str, Any],
        direction: str,
        catalog: Catalog,
        tasks: bool,
        params: dict[str, Any],
    ) -> InFlight | None:
        """Remember a request; the earlier request with its id still in flight, if any."""
        ident = key(message["id"])
        request_key = (scopes(record)[0], direction, ident)
        earlier = self.pending.get(request_key)
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        token_key = key(token) if token is not None else None
        if token_key is not None:
            self.tokens[token_key] = self.tokens.get(token_key, 0) + 1
        self.cancelled.discard((direction, ident))
        started = InFlight(
            message["method"], catalog, direction, request_key, tasks, params, token_key,
            record.exchange, message["id"],
        )  # fmt: skip
        if earlier is not None:
            self._unindex(earlier)
        self.pending[request_key] = started
        self.by_id.setdefault((direction, ident), []).append(started)
        return earlier

    def _unindex(self, pending: InFlight) -> None:
        same = self.by_id.get(pending.key[1:])
        if same is not None:
            if pending in same:
                same.remove(pending)
            if not same:
                del self.by_id[pending.key[1:]]

    def finish(self, pending: InFlight) -> None:
        if self.pending.get(pending.key) is pending:
            del self.pending[pending.key]
        self._unindex(pending)
        if pending.token is not None:
            left = self.tokens.get(pending.token, 0) - 1
            if left > 0:
                self.tokens[pending.token] = left
            else:
                self.tokens.pop(pending.token, None)

    def cancel(self, record: Record, direction: str, request_id: object) -> None:
        """``direction`` gave up its request ``request_id``: a late answer is no orphan."""
        ident = key(request_id)
        for scope in scopes(record):
            pending = self.pending.get((scope, direction, ident))
            if pending is not None:
                self.finish(pending)
                break
        self.cancelled.add((direction, ident))

    def in_exchange(self, exchange: Any) -> InFlight | None:
        """The request in flight that the client sent in HTTP exchange ``exchange``."""
        if exchange is None:
            return None
        return next((p for p in self.pending.values() if p.exchange == exchange), None)

    def end_exchange(self, exchange: Any) -> None:
        """The HTTP exchange ended without a JSON-RPC response (an error status, a dropped
        connection): its request is no longer in flight."""
        for pending in [p for p in self.pending.values() if p.exchange == exchange]:
            self.finish(pending)

    def was_cancelled(self, sender: str, request_id: object) -> bool:
        return (sender, key(request_id)) in self.cancelled

    def in_flight_from(self, sender: str, request_id: object) -> bool:
        return (sender, key(request_id)) in self.by_id

    def match(self, record: Record, message: Mapping[str, Any], direction: str) -> InFlight | None:
        """The request a response answers: the one with its id from the other side, in the
        same exchange, scope (session, connection) or, failing those, anywhere."""
        candidates = self.by_id.get((OTHER[direction], key(message.get("id"))))
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        if record.exchange is not None:
            for pending in candidates:
                if pending.exchange == record.exchange:
                    return pending
        for scope in scopes(record):
            for pending in candidates:
                if pending.key[0] == scope:
                    return pending
        return candidates[0]

    # ------------------------------------------------------------------ progress

    def token_live(self, token: object) -> bool:
        """A request in flight sent this progress token (or became a task that keeps it)."""
        token_key = key(token)
        return bool(self.tokens.get(token_key)) or token_key in self.lasting_tokens

    def keep_token(self, pending: InFlight) -> None:
        """The request became a task: its progress token stays valid for the task's life."""
        if pending.token is not None:
            self.lasting_tokens.add(pending.token)

    # ------------------------------------------------------------------ versions, sessions

    def session_version(self, record: Record) -> str | None:
        session = record.header(SESSION_HEADER)
        return self.negotiated.get(("session", session)) if session is not None else None

    def scope_version(self, record: Record) -> str | None:
        for scope in scopes(record):
            if scope in self.negotiated:
                return self.negotiated[scope]
        return None

    def negotiate(self, record: Record, pending: InFlight | None, version: str) -> None:
        """An ``initialize`` was answered: its session, connection and the capture's default
        speak ``version`` from now on."""
        found = scopes(record)
        if pending is not None:
            found.append(pending.key[0])
        for scope in found:
            self.negotiated[scope] = version
        session = record.header(SESSION_HEADER)
        if session is not None and record.conn is not None:
            self.sessions[record.conn] = session

    # ------------------------------------------------------------------ HTTP exchanges

    def note_exchange(self, record: Record, kind: str, catalog: Catalog) -> None:
        if record.exchange is not None:
            self.exchanges[record.exchange] = Exchange(kind, catalog, record.header(SESSION_HEADER))

    def exchange(self, record: Record) -> Exchange | None:
        return self.exchanges.get(record.exchange) if record.exchange is not None else None
