"""The older era's sessions under attack: floods of DELETE, GET and ``initialize``, pushed
requests never answered or answered from elsewhere, more pushes than a session may have
waiting, a GET stream whose reader stops, and one principal using another's session.

Each attack ends by checking that nothing is held (listeners on the bus, pending pushes,
running requests, background work) and that the server still serves. Timings that matter
run on trio's ``MockClock``: the tests never depend on the machine's speed (the floods run on
the real clock, with bounds far above what they take).

The tests whose docstring starts with BUG are minimal reproductions of defects these
attacks (and the "sessions" fuzz family) found; they fail until the server is fixed.
"""

from __future__ import annotations

import json
import math
import secrets
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
import trio
import trio.testing
from support.sessions_app import build

from presa_trio import AsgiApp, Context, Limits, Sessions, Timeouts
from presa_trio._asgi_driver import Exchange, asgi_scope
from presa_trio.testing import HttpResult, drive

JSON = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
VERSION = "2025-11-25"
TENANT = "mcp-tenant"  # who is asking, for this file's servers
PUSH_TIMEOUT = 0.3
SMALL = Sessions(push_timeout=PUSH_TIMEOUT, max_pending_pushes=2, max_sessions_per_principal=5)
ADA = {"action": "accept", "content": {"name": "Ada"}}
GONE = {"code": -32001, "message": "Session not found"}
NOT_ANSWERED = {
    "code": -32603,
    "message": f"The client did not answer elicitation/create within {PUSH_TIMEOUT:g} s",
}
FLOOD_BOUND = 60.0  # seconds of real time; each flood here takes well under one


def tenant_of(ctx: Context) -> str:
    return (ctx.headers.get(TENANT) if ctx.headers else None) or "nobody"


def attack_app(
    sessions: Sessions = SMALL, timeouts: Timeouts | None = None, **options: Any
) -> AsgiApp:
    server = build(sessions=sessions, principal=tenant_of, **options)
    return server.asgi_app(timeouts=timeouts) if timeouts else server.asgi_app()


def rpc(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def answer(push_id: str, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": push_id, "result": result}


def initialize(request_id: int = 1) -> dict[str, Any]:
    params = {
        "protocolVersion": VERSION,
        "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
        "clientInfo": {"name": "attacks", "version": "1"},
    }
    return rpc("initialize", params, request_id)


@dataclass
class Peer:
    """One client: the tenant it speaks for and the session it opened (if any)."""

    app: AsgiApp
    tenant: str
    session_id: str = ""

    def headers(self, session_id: str | None = None) -> list[tuple[str, str]]:
        sid = self.session_id if session_id is None else session_id
        return [
            *JSON,
            (TENANT, self.tenant),
            ("mcp-session-id", sid),
            ("mcp-protocol-version", VERSION),
        ]

    async def open(self) -> Peer:
        opened = await drive(self.app, json.dumps(initialize()), [*JSON, (TENANT, self.tenant)])
        assert opened.status == 200, opened.body
        self.session_id = opened.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.post(initialized)).status == 202
        return self

    async def post(self, message: dict[str, Any], session_id: str | None = None) -> HttpResult:
        return await drive(self.app, json.dumps(message), self.headers(session_id))

    async def send(self, method: str, session_id: str | None = None) -> HttpResult:
        """A GET or DELETE on the session (or on ``session_id``)."""
        return await drive(self.app, b"", self.headers(session_id), method=method)

    async def ping(self) -> int:
        result = await self.post(rpc("ping", request_id="ping"))
        assert result.messages == [{"jsonrpc": "2.0", "id": "ping", "result": {}}], result.body
        return result.status


class Live:
    """One exchange read message by message as the server writes it (a tool call whose
    pushes the test answers, or a GET stream); ``leave`` disconnects."""

    def __init__(self, app: AsgiApp, method: str, headers: list[tuple[str, str]], body: bytes):
        self.app = app
        self.scope = asgi_scope(method, app.path, headers)
        self.exchange = Exchange(body)
        self.messages: list[dict[str, Any]] = []
        self.raw = b""
        self.done = trio.Event()
        self._arrived, self._arrivals = trio.open_memory_channel[dict[str, Any]](math.inf)

    @classmethod
    def call(cls, peer: Peer, tool: str, request_id: Any) -> Live:
        message = rpc("tools/call", {"name": tool, "arguments": {}}, request_id)
        return cls(peer.app, "POST", peer.headers(), json.dumps(message).encode())

    @classmethod
    def get(cls, peer: Peer) -> Live:
        return cls(peer.app, "GET", peer.headers(), b"")

    @property
    def status(self) -> int:
        return self.exchange.status

    @property
    def final(self) -> dict[str, Any]:
        (found,) = [m for m in self.messages if "method" not in m]
        return found

    async def run(self) -> None:
        """Play the exchange until the app returns."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read)
            await self.app(self.scope, self.exchange.receive, self.exchange.send)
            self.exchange.chunks_send.close()  # nothing more comes, however the app ended
        self.done.set()

    async def _read(self) -> None:
        await self.exchange.started.wait()
        streamed = self.exchange.headers.get("content-type", "").startswith("text/event-stream")
        buffer = b""
        async for chunk in self.exchange.chunks:
            self.raw += chunk
            buffer += chunk
            while streamed and b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                for line in frame.decode().splitlines():
                    if line.startswith("data:") and line[5:].strip():  # not a priming event
                        self._arrive(json.loads(line[5:]))
        if not streamed and buffer:
            self._arrive(json.loads(buffer))
        self.exchange.disconnected.set()  # the response is over: the client goes

    def _arrive(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._arrived.send_nowait(message)

    async def next_push(self) -> dict[str, Any]:
        """The next request the server pushes on this exchange."""
        while True:
            message = await self._arrivals.receive()
            if "method" in message and "id" in message:
                return message

    def leave(self) -> None:
        self.exchange.disconnected.set()


def assert_nothing_held(app: AsgiApp, background: int) -> None:
    runtime = app.runtime
    assert runtime is not None
    signals = runtime.sessions.signals
    assert runtime.bus.listener_count == 0
    assert signals._pending == {}
    assert signals._pushes == {}
    assert signals._running == {}
    assert runtime.background_count == background


def background_of(app: AsgiApp) -> int:
    assert app.runtime is not None
    return app.runtime.background_count


async def greeted(peer: Peer, request_id: Any) -> str:
    """A ``greet`` call whose pushed elicitation the test answers with Ada; its text."""
    call = Live.call(peer, "greet", request_id)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call.run)
        pushed = await call.next_push()
        assert (await peer.post(answer(pushed["id"], ADA))).status == 202
    text: str = call.final["result"]["content"][0]["text"]
    return text


# ---------------------------------------------------------------------------- DELETE floods


async def test_a_delete_flood_on_one_session_ends_it_exactly_once() -> None:
    app = attack_app()
    async with app.lifespan():
        background = background_of(app)
        alice = await Peer(app, "alice").open()
        bystander = await Peer(app, "alice").open()
        statuses: Counter[int] = Counter()
        bodies: set[bytes] = set()

        async def delete() -> None:
            result = await alice.send("DELETE")
            statuses[result.status] += 1
            if result.status == 404:
                bodies.add(result.body)

        with trio.fail_after(FLOOD_BOUND):
            async with trio.open_nursery() as nursery:
                for _ in range(300):
                    nursery.start_soon(delete)
            for _ in range(300):
                await delete()
        assert statuses == {200: 1, 404: 599}
        assert [json.loads(body)["error"] for body in bodies] == [GONE]
        assert (await alice.post(rpc("ping"))).status == 404
        assert await bystander.ping() == 200  # another session of the same principal lives
        assert_nothing_held(app, background)
        # The ended session's place is free again: the principal opens its share anew.
        for _ in range(4):
            await Peer(app, "alice").open()
        assert (await greeted(bystander, "after")).startswith("Hello, Ada!")
        assert_nothing_held(app, background)


def junk_session_ids() -> list[tuple[str, int]]:
    """Session ids that name no session, with the status each deserves: 404 for what could
    be an id (any visible ASCII, however long or short), 400 for what cannot be a header
    value of one (outside visible ASCII)."""
    found = [(secrets.token_urlsafe(24), 404) for _ in range(100)]
    found += [("x" * n, 404) for n in (1, 255, 256, 257, 4096)]
    found += [("", 404), (" ", 404), ("../../etc/passwd", 404), ("%00", 404), ("*", 404)]
    found += [("a b", 404), ("\t", 404)]
    found += [("caf\u00e9", 400), ("a\x00b", 400), ("\x7f", 400), ("\u00ff" * 40, 400)]
    return found


async def test_a_delete_flood_of_junk_ids_ends_nothing_and_holds_nothing() -> None:
    app = attack_app()
    async with app.lifespan():
        background = background_of(app)
        alice = await Peer(app, "alice").open()
        mallory = Peer(app, "mallory")
        got: list[tuple[str, int, int, Any]] = []

        async def delete(session_id: str, deserved: int) -> None:
            result = await mallory.send("DELETE", session_id)
            error = json.loads(result.body)["error"] if result.body else None
            got.append((session_id, deserved, result.status, error))

        ids = junk_session_ids() * 3
        with trio.fail_after(FLOOD_BOUND):
            async with trio.open_nursery() as nursery:
                for session_id, deserved in ids:
                    nursery.start_soon(delete, session_id, deserved)
        assert len(got) == len(ids)
        for session_id, deserved, status, error in got:
            assert status == deserved, (session_id, status, error)
            if status == 404:
                assert error == GONE
            else:
                assert error["code"] == -32020 and "mcp-session-id" in error["message"]
        assert await alice.ping() == 200
        assert_nothing_held(app, background)
        fresh = await Peer(app, "mallory").open()
        assert await fresh.ping() == 200


# ---------------------------------------------------------------------------- GET floods


async def test_a_get_flood_on_one_session_gets_one_stream_and_conflicts() -> None:
    app = attack_app()
    async with app.lifespan():
        runtime = app.runtime
        assert runtime is not None
        background = background_of(app)
        alice = await Peer(app, "alice").open()
        streams = [Live.get(alice) for _ in range(100)]
        with trio.fail_after(FLOOD_BOUND):
            async with trio.open_nursery() as nursery:
                for stream in streams:
                    nursery.start_soon(stream.run)
                # Every GET has its answer: one stream, and 409 for the others (the claim
                # is taken atomically, whichever GET comes first).
                for stream in streams:
                    await stream.exchange.started.wait()
                statuses = Counter(stream.status for stream in streams)
                assert statuses == {200: 1, 409: 99}
                await trio.testing.wait_all_tasks_blocked()
                refused = [s for s in streams if s.status == 409]
                assert all(s.done.is_set() for s in refused)
                assert {json.dumps(s.final["error"]) for s in refused} == {
                    json.dumps(
                        {
                            "code": -32600,
                            "message": "Conflict: this session already has a GET stream",
                        }
                    )
                }
                assert runtime.bus.listener_count == 1
                # a flood of GETs after it: still 409, and no second listener
                for _ in range(100):
                    assert (await alice.send("GET")).status == 409
                assert runtime.bus.listener_count == 1
                assert await alice.ping() == 200  # the session serves meanwhile
                (held,) = [s for s in streams if s.status == 200]
                held.leave()
        assert_nothing_held(app, background)
        again = Live.get(alice)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(again.run)
            await again.exchange.started.wait()
            assert again.status == 200  # the claim was released with the stream
            again.leave()
        assert_nothing_held(app, background)
        fresh = await Peer(app, "bob").open()
        assert await fresh.ping() == 200


async def test_a_get_flood_on_junk_ids_holds_nothing() -> None:
    app = attack_app()
    async with app.lifespan():
        background = background_of(app)
        mallory = Peer(app, "mallory")
        statuses: Counter[tuple[str, int, int]] = Counter()

        async def get(session_id: str, deserved: int) -> None:
            result = await mallory.send("GET", session_id)
            statuses[(session_id, deserved, result.status)] += 1

        ids = junk_session_ids() * 3
        with trio.fail_after(FLOOD_BOUND):
            async with trio.open_nursery() as nursery:
                for session_id, deserved in ids:
                    nursery.start_soon(get, session_id, deserved)
        assert sum(statuses.values()) == len(ids)
        assert [k for k in statuses if k[1] != k[2]] == []
        assert_nothing_held(app, background)
        alice = await Peer(app, "alice").open()
        assert await alice.ping() == 200


async def test_get_streams_past_the_listen_bound_are_refused_with_503() -> None:
    """BUG: a GET stream is admitted to the run's bus only after its response has started
    (a keepalive is written first), so past ``max_listeners`` the client gets HTTP 200, one
    keepalive and an immediate end: no error, nothing logged, and a client that reconnects
    its GET stream (as the SDKs do) spins. It should be refused before the stream starts,
    as a 2026-07-28 listen stream is: 503, -32603, ``data.limit`` naming the bound."""
    app = attack_app(limits=Limits(max_listeners=1))
    async with app.lifespan():
        background = background_of(app)
        alice = await Peer(app, "alice").open()
        bob = await Peer(app, "bob").open()
        first = Live.get(alice)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first.run)
            await first.exchange.started.wait()
            assert first.status == 200
            with trio.fail_after(10):
                second = await bob.send("GET")
            first.leave()
        assert_nothing_held(app, background)
    assert (second.status, second.headers.get("content-type")) == (503, "application/json"), (
        second.status,
        second.body,
    )
    assert json.loads(second.body)["error"] == {
        "code": -32603,
        "message": "Too many open listen streams",
        "data": {"retryable": True, "limit": "max_listen_streams"},
    }


# ---------------------------------------------------------------------------- pushes


async def test_pushes_never_answered_fail_at_push_timeout_and_leave_nothing(
    mock_clock: trio.testing.MockClock,
) -> None:
    app = attack_app()
    async with app.lifespan():
        runtime = app.runtime
        assert runtime is not None
        background = background_of(app)
        alice = await Peer(app, "alice").open()
        calls = [Live.call(alice, "greet", n) for n in (1, 2)]
        async with trio.open_nursery() as nursery:
            for call in calls:
                nursery.start_soon(call.run)
                await call.next_push()
            await trio.testing.wait_all_tasks_blocked()
            assert runtime.sessions.signals._pending == {alice.session_id: 2}
            mock_clock.jump(PUSH_TIMEOUT - 0.01)
            await trio.testing.wait_all_tasks_blocked()
            assert not any(call.done.is_set() for call in calls)  # still waiting
            mock_clock.jump(0.01)
        for call in calls:
            pushed, cancelled, final = call.messages
            assert cancelled["method"] == "notifications/cancelled"
            assert cancelled["params"]["requestId"] == pushed["id"]
            assert final["error"] == NOT_ANSWERED
        assert_nothing_held(app, background)
        # The session still works: a ping, and a call whose push is answered.
        assert await alice.ping() == 200
        assert (await greeted(alice, 3)).startswith("Hello, Ada!")
        assert_nothing_held(app, background)


async def test_pushes_past_max_pending_pushes_are_refused_on_http_200(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The third call that would push while two wait is refused at once, as a JSON-RPC
    error on HTTP 200 (the session is live; ``data`` says retryable and names the bound);
    the two waiting are unaffected, and another session of the same principal is not
    bounded by this one's pushes."""
    app = attack_app()
    async with app.lifespan():
        runtime = app.runtime
        assert runtime is not None
        background = background_of(app)
        alice = await Peer(app, "alice").open()
        other = await Peer(app, "alice").open()
        waiting = [Live.call(alice, "greet", n) for n in (1, 2)]
        async with trio.open_nursery() as nursery:
            pushed = []
            for call in waiting:
                nursery.start_soon(call.run)
                pushed.append(await call.next_push())
            extra = await alice.post(rpc("tools/call", {"name": "greet", "arguments": {}}, 3))
            assert (extra.status, extra.headers["content-type"]) == (200, "text/event-stream")
            assert extra.messages == [
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "error": {
                        "code": -32603,
                        "message": "Too many requests await this client",
                        "data": {"retryable": True, "limit": "max_pending_pushes"},
                    },
                }
            ]
            assert runtime.sessions.signals._pending == {alice.session_id: 2}
            assert (await greeted(other, "other")).startswith("Hello, Ada!")
            for push in pushed:
                assert (await alice.post(answer(push["id"], ADA))).status == 202
        for call in waiting:
            assert call.final["result"]["content"][0]["text"].startswith("Hello, Ada!")
        assert_nothing_held(app, background)
        assert (await greeted(alice, 4)).startswith("Hello, Ada!")
        assert_nothing_held(app, background)


async def test_an_answer_to_another_sessions_push_is_not_delivered(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Mallory, who learnt the id of a request pushed to Alice, answers it: from her own
    session the answer is taken (202) and dropped, from Alice's session id she is told the
    session does not exist (404); so is Alice's other session. Alice's call keeps waiting
    and times out; it never sees Mallory's answer."""
    app = attack_app()
    async with app.lifespan():
        runtime = app.runtime
        assert runtime is not None
        background = background_of(app)
        alice = await Peer(app, "alice").open()
        alices_other = await Peer(app, "alice").open()
        mallory = await Peer(app, "mallory").open()
        forged = {"action": "accept", "content": {"name": "Mallory"}}
        victim = Live.call(alice, "greet", 1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(victim.run)
            push = await victim.next_push()
            stolen = answer(push["id"], forged)
            from_own = await mallory.post(stolen)
            from_victims = await mallory.post(stolen, session_id=alice.session_id)
            from_sibling = await alices_other.post(stolen)
            assert (from_own.status, from_own.body) == (202, b"")
            assert (from_sibling.status, from_sibling.body) == (202, b"")
            assert from_victims.status == 404
            assert from_victims.messages[0]["error"] == GONE
            await trio.testing.wait_all_tasks_blocked()
            assert not victim.done.is_set()  # the forged answers reached nobody
            assert runtime.sessions.signals._pending == {alice.session_id: 1}
            mock_clock.jump(PUSH_TIMEOUT)
        assert victim.final["error"] == NOT_ANSWERED
        assert b"Mallory" not in victim.raw
        assert_nothing_held(app, background)
        assert (await greeted(alice, 2)).startswith("Hello, Ada!")


# ---------------------------------------------------------------------------- initialize flood


async def test_an_initialize_flood_is_bounded_by_the_principals_share() -> None:
    app = attack_app()
    async with app.lifespan():
        background = background_of(app)
        statuses: Counter[int] = Counter()
        opened: list[str] = []
        refusals: set[str] = set()

        async def flood_once() -> None:
            result = await drive(app, json.dumps(initialize()), [*JSON, (TENANT, "mallory")])
            statuses[result.status] += 1
            if result.status == 200:
                opened.append(result.headers["mcp-session-id"])
            else:
                assert "mcp-session-id" not in result.headers
                refusals.add(json.dumps(result.messages[0]))

        with trio.fail_after(FLOOD_BOUND):
            async with trio.open_nursery() as nursery:
                for _ in range(500):
                    nursery.start_soon(flood_once)
            for _ in range(2_000):
                await flood_once()
        assert statuses == {200: 5, 503: 2_495}
        assert [json.loads(r) for r in refusals] == [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {
                    "code": -32603,
                    "message": "Too many open sessions",
                    "data": {"retryable": True, "limit": "max_sessions_per_principal"},
                },
            }
        ]
        # Others are served, and Mallory's own sessions work.
        alice = await Peer(app, "alice").open()
        assert await alice.ping() == 200
        for session_id in opened:
            assert await Peer(app, "mallory", session_id).ping() == 200
        # Ending one of them frees one place, and one only.
        assert (await Peer(app, "mallory", opened[0]).send("DELETE")).status == 200
        again = [
            (await drive(app, json.dumps(initialize()), [*JSON, (TENANT, "mallory")])).status
            for _ in range(3)
        ]
        assert again == [200, 503, 503]
        assert_nothing_held(app, background)


# ---------------------------------------------------------------------------- a stalled GET


async def test_a_get_stream_whose_reader_stops_is_dropped_and_its_claim_released(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The client reads the stream's start, then stops reading: the next write (the
    keepalive after a quiet spell) waits ``write`` seconds, then the stream is dropped, its
    listener gone and its claim let go: the session's next GET is served."""
    app = attack_app(timeouts=Timeouts(write=2.0))
    async with app.lifespan():
        runtime = app.runtime
        assert runtime is not None
        background = background_of(app)
        alice = await Peer(app, "alice").open()
        writes: list[dict[str, Any]] = []
        stuck = trio.Event()

        async def receive() -> dict[str, Any]:
            await trio.sleep_forever()  # never a disconnect: the client just stops reading
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            writes.append(message)
            if len(writes) > 2:  # the start and the first keepalive were read
                stuck.set()
                await trio.sleep_forever()
            await trio.lowlevel.checkpoint()

        ended = trio.Event()

        async def stalled() -> None:
            scope = asgi_scope("GET", app.path, alice.headers())
            await app(scope, receive, send)
            ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stalled)
            await trio.testing.wait_all_tasks_blocked()
            assert [w["type"] for w in writes] == ["http.response.start", "http.response.body"]
            assert runtime.bus.listener_count == 1
            assert (await alice.send("GET")).status == 409  # its claim holds
            mock_clock.jump(15.0)  # a quiet spell: the keepalive is written, and not read
            await stuck.wait()
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(2.0 - 0.01)
            await trio.testing.wait_all_tasks_blocked()
            assert not ended.is_set()
            mock_clock.jump(0.01)
            await ended.wait()
        assert_nothing_held(app, background)
        again = Live.get(alice)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(again.run)
            await again.exchange.started.wait()
            assert again.status == 200
            again.leave()
        assert await alice.ping() == 200
        assert_nothing_held(app, background)


# ---------------------------------------------------------------------------- another's session


async def exchanges_of(peer: Peer, session_id: str) -> list[tuple[int, bytes]]:
    """Everything one can send on a session, sent by ``peer`` naming ``session_id``."""
    got = []
    for message in (
        rpc("tools/list", {}, 5),
        rpc("tools/call", {"name": "greet", "arguments": {}}, 6),
        rpc("ping", None, 7),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        answer("presa-x-1", ADA),
    ):
        result = await peer.post(message, session_id)
        got.append((result.status, result.body))
    for method in ("GET", "DELETE"):
        result = await peer.send(method, session_id)
        got.append((result.status, result.body))
    return got


async def test_anothers_session_is_indistinguishable_from_an_unknown_one() -> None:
    app = attack_app()
    async with app.lifespan():
        background = background_of(app)
        alice = await Peer(app, "alice").open()
        mallory = await Peer(app, "mallory").open()
        with_alices = await exchanges_of(mallory, alice.session_id)
        with_unknown = await exchanges_of(mallory, secrets.token_urlsafe(24))
        assert with_alices == with_unknown
        assert {status for status, _ in with_alices} == {404}
        assert {json.dumps(json.loads(body)["error"]) for _, body in with_alices} == {
            json.dumps(GONE)
        }
        # Nothing of Alice's was touched: her session serves, its GET stream is free.
        assert await alice.ping() == 200
        stream = Live.get(alice)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.run)
            await stream.exchange.started.wait()
            assert stream.status == 200
            stream.leave()
        assert (await greeted(alice, 9)).startswith("Hello, Ada!")
        assert_nothing_held(app, background)


# ---------------------------------------------------------------------------- junk on a POST


@pytest.mark.parametrize("params", [5, ["a"], None], ids=["number", "array", "absent"])
@pytest.mark.parametrize("whose", ["unknown", "none", "another principal's"])
async def test_a_session_request_with_junk_params_is_not_served_without_its_session(
    params: Any, whose: str
) -> None:
    """BUG (``params`` not an object): a request that names no live session of its caller
    must be 404 (or 400 without a session header), whatever its params; the server checks
    the params first and answers HTTP 200, -32602, which tells a client whose session has
    expired that it is still live (an older-era client re-initializes only on a 404)."""
    app = attack_app()
    async with app.lifespan():
        alice = await Peer(app, "alice").open()
        mallory = Peer(app, "mallory")
        message = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": params}
        if params is None:
            del message["params"]
        if whose == "none":
            headers = [h for h in mallory.headers() if h[0] != "mcp-session-id"]
            result = await drive(app, json.dumps(message), headers)
            expected = (
                400,
                {"code": -32600, "message": "Bad Request: Mcp-Session-Id header is required"},
            )
        else:
            sid = alice.session_id if whose == "another principal's" else secrets.token_urlsafe(24)
            result = await mallory.post(message, sid)
            expected = (404, GONE)
        assert (result.status, result.messages[0]["error"]) == expected


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "attacks", "version": "1"},
}


@pytest.mark.parametrize(
    "what",
    ["request", "notification", "answer", "2026-07-28 request"],
)
@pytest.mark.parametrize("how", ["repeated", "non-ASCII"])
async def test_a_post_with_a_malformed_session_header_is_refused_naming_it(
    what: str, how: str
) -> None:
    """BUG: an ``Mcp-Session-Id`` that appears twice or holds more than visible ASCII makes
    the POST skip the session path (``_serve``: "a repeated header: not a session's;
    2026-07-28 refuses it"), but 2026-07-28 does not refuse it: an older client's request is
    told ``params._meta`` is required (a field of another revision), its notification (a
    ``notifications/cancelled``, say) is taken with 202 and never acted on, its answer to a
    pushed request is told clients must not send responses, and a 2026-07-28 request is
    served as if the header were absent (while one well-formed session header gets it a 400).
    GET and DELETE refuse the same header with 400 naming it; a POST should too."""
    app = attack_app()
    async with app.lifespan():
        alice = await Peer(app, "alice").open()
        sid = alice.session_id
        bad = (
            [("mcp-session-id", sid)] * 2
            if how == "repeated"
            else [("mcp-session-id", sid + "\u00e9")]
        )
        version = "2026-07-28" if what.startswith("2026") else VERSION
        headers = [*JSON, (TENANT, "alice"), ("mcp-protocol-version", version), *bad]
        message: dict[str, Any] = {
            "request": rpc("tools/list", {}, 4),
            "notification": {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 1},
            },
            "answer": answer("presa-x-1", ADA),
            "2026-07-28 request": rpc("tools/list", {"_meta": MODERN_META}, 4),
        }[what]
        if what.startswith("2026"):
            headers.append(("mcp-method", "tools/list"))
        result = await drive(app, json.dumps(message), headers)
        for method in ("GET", "DELETE"):  # what the same header gets on the other verbs
            other = await drive(app, b"", headers, method=method)
            assert other.status == 400
            assert "mcp-session-id" in other.messages[0]["error"]["message"]
        assert result.status == 400, (result.status, result.body)
        error = result.messages[0]["error"]
        assert error["code"] in (-32600, -32020), error
        assert "mcp-session-id" in error["message"].lower(), error


@pytest.mark.parametrize("what", ["request", "notification", "answer"])
@pytest.mark.parametrize("how", ["repeated", "non-ASCII"])
async def test_a_sessions_post_with_a_malformed_version_header_is_refused_naming_it(
    what: str, how: str
) -> None:
    """BUG (same root as above): with a well-formed session header, a malformed
    ``MCP-Protocol-Version`` sends the POST down the 2026-07-28 path too. A request is
    refused naming the header (400, -32020: right); a notification is taken with 202 and
    never reaches the session (a ``notifications/cancelled`` is silently lost); an answer to
    a pushed request is told clients must not send responses. The transport says a request
    with an invalid version header MUST be answered 400."""
    app = attack_app()
    async with app.lifespan():
        alice = await Peer(app, "alice").open()
        if how == "repeated":
            versions = [("mcp-protocol-version", VERSION)] * 2
        else:
            versions = [("mcp-protocol-version", VERSION + "\u00e9")]
        headers = [*JSON, (TENANT, "alice"), ("mcp-session-id", alice.session_id), *versions]
        message = {
            "request": rpc("ping", None, 4),
            "notification": {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 1},
            },
            "answer": answer("presa-x-1", ADA),
        }[what]
        result = await drive(app, json.dumps(message), headers)
        assert result.status == 400, (result.status, result.body)
        error = result.messages[0]["error"]
        assert error["code"] in (-32600, -32020), error
        assert "mcp-protocol-version" in error["message"].lower(), error


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("version", ["2026-07-28", "junk"])
async def test_get_and_delete_with_an_unsupported_version_header_are_400(
    method: str, version: str
) -> None:
    """BUG: a POST on a session with ``MCP-Protocol-Version: 2026-07-28`` (or any version
    not served) is 400 "Unsupported protocol version"; a GET or a DELETE with the same
    header is served (a stream, or the session ended). The 2025-06-18 and 2025-11-25
    transports: a request with an invalid or unsupported version header MUST get 400."""
    app = attack_app()
    async with app.lifespan():
        alice = await Peer(app, "alice").open()
        headers = [
            *JSON,
            (TENANT, "alice"),
            ("mcp-session-id", alice.session_id),
            ("mcp-protocol-version", version),
        ]
        posted = await drive(app, json.dumps(rpc("ping")), headers)
        assert posted.status == 400  # the POST is refused
        with trio.fail_after(10):
            live = Live(app, method, headers, b"")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(live.run)
                await live.exchange.started.wait()
                live.leave()
        assert live.status == 400, live.status
        assert await alice.ping() == 200  # and the session was not ended
