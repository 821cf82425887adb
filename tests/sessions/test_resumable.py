"""Resumable streams of 2025-11-25 sessions (SEP-1699), in process, on memory and SQLite:
the priming event, a stream closed on purpose and resumed, a client that drops mid-call and
gets every event once, in order, then the answer; what is not resumable; the ids a server
never gave, another session's and expired ones; the bounds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from support.sessions_app import build

from presa_trio import Context, Server, Sessions
from presa_trio._asgi_driver import Exchange, asgi_scope
from presa_trio.testing import SessionClient, Stream, open_client, open_session
from presa_trio.testing import drive as drive_http

NO_ARGS = {"type": "object", "properties": {}}
NOT_HELD = {
    "code": -32600,
    "message": "Bad Request: Last-Event-ID names no event of a stream this session still holds",
}


class Gates:
    """What the test lets the tools do, step by step."""

    def __init__(self) -> None:
        self.go = trio.Event()


def resumable_server(gates: Gates, backend: str | None = None, **sessions: Any) -> Server:
    server = build(sessions=Sessions(**sessions), backend=backend)

    @server.tool(input_schema=NO_ARGS)
    async def hang_up(ctx: Context) -> str:
        """Logs, closes its stream's connection, logs again, answers."""
        await ctx.log("info", "before")
        assert await ctx.close_stream()
        await ctx.log("info", "after")
        return "answered after the hang-up"

    @server.tool(input_schema=NO_ARGS)
    async def try_hang_up(ctx: Context) -> str:
        """Logs, tries to close its stream's connection, answers whether it could."""
        await ctx.log("info", "before")
        return f"closed: {await ctx.close_stream()}"

    @server.tool(input_schema=NO_ARGS)
    async def gated(ctx: Context) -> str:
        """Logs one, waits for the test, logs two and three, answers."""
        await ctx.log("info", "one")
        await gates.go.wait()
        await ctx.log("info", "two")
        await ctx.log("info", "three")
        return "gated done"

    @server.tool()
    async def talk(ctx: Context, count: int) -> str:
        """Logs ``count`` messages, then answers."""
        for n in range(count):
            await ctx.log("info", f"message {n}")
        return f"said {count}"

    return server


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    return None if request.param == "memory" else f"sqlite:///{tmp_path / 'run.db'}"


def frames(raw: bytes) -> list[dict[str, str]]:
    """The SSE events of ``raw``, each as its fields (comments left out)."""
    events = []
    for frame in raw.decode().split("\n\n"):
        fields = {}
        for line in frame.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        if fields:
            events.append(fields)
    return events


def call(name: str, request_id: int, arguments: dict[str, Any] | None = None) -> bytes:
    params = {"name": name, "arguments": arguments or {}}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message).encode()


async def resume(session: SessionClient, last_event_id: str) -> Any:
    headers = [(k, v) for k, v in session.headers() if k != "content-type"]
    return await drive_http(session.app, b"", [*headers, ("last-event-id", last_event_id)],
                            method="GET")  # fmt: skip


@pytest.fixture
async def opened(backend: str | None) -> AsyncIterator[tuple[SessionClient, Gates]]:
    gates = Gates()
    async with open_session(resumable_server(gates, backend)) as session:
        yield session, gates


# ---------------------------------------------------------------------------- the stream


async def test_a_call_opens_with_a_priming_event_then_names_every_event(
    opened: tuple[SessionClient, Gates],
) -> None:
    session, _ = opened
    result = await drive_http(session.app, call("talk", 5, {"count": 2}), session.headers())
    assert (result.status, result.headers["content-type"]) == (200, "text/event-stream")
    events = frames(result.body)
    stream = events[0]["id"].rsplit("_", 1)[0]
    assert events[0] == {"id": f"{stream}_0", "retry": "1000", "data": ""}
    assert [e["id"] for e in events[1:]] == [f"{stream}_{n}" for n in (1, 2, 3)]
    assert [json.loads(e["data"]).get("method") for e in events[1:]] == [
        "notifications/message",
        "notifications/message",
        None,
    ]
    assert json.loads(events[3]["data"])["result"]["content"][0]["text"] == "said 2"


async def test_a_stream_closed_on_purpose_is_resumed_and_answered(
    opened: tuple[SessionClient, Gates],
) -> None:
    session, _ = opened
    answered = [await session.call_tool("hang_up", {})]
    assert answered[0]["content"][0]["text"] == "answered after the hang-up"
    assert session.resumed >= 1
    logged = [n["params"]["data"] for n in session.notifications]
    assert logged == ["before", "after"]


async def test_a_dropped_client_resumes_every_event_once_in_order(
    opened: tuple[SessionClient, Gates],
) -> None:
    """The client goes after the first message; the call runs on (a disconnect is not a
    cancel), and a GET with the last id seen gets the rest, then the answer."""
    session, gates = opened
    exchange = Exchange(call("gated", 9))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            session.app, asgi_scope("POST", "/mcp", session.headers()), exchange.receive,
            exchange.send,
        )  # fmt: skip
        seen = Stream(exchange, lambda message: None)
        first = await seen.next()
        assert first["params"]["data"] == "one"
        seen.disconnect()
        last = seen.last_event_id
        assert last is not None and last.endswith("_1")
        gates.go.set()
        result = await resume(session, last)
    assert result.status == 200
    messages = result.messages
    assert [m.get("params", {}).get("data") for m in messages[:2]] == ["two", "three"]
    assert messages[2] == {
        "jsonrpc": "2.0",
        "id": 9,
        "result": {
            "content": [{"type": "text", "text": "gated done"}],
            "structuredContent": {"result": "gated done"},
        },
    }
    ids = [e["id"] for e in frames(result.body) if "data" in e]
    stream = last.rsplit("_", 1)[0]
    assert ids == [f"{stream}_{n}" for n in (2, 3, 4)]
    again = await resume(session, f"{stream}_3")  # a second resume: only what followed
    assert again.messages == [messages[2]]


async def test_a_resume_before_the_answer_follows_the_stream_live(
    opened: tuple[SessionClient, Gates],
) -> None:
    session, gates = opened
    exchange = Exchange(call("gated", 4))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            session.app, asgi_scope("POST", "/mcp", session.headers()), exchange.receive,
            exchange.send,
        )  # fmt: skip
        seen = Stream(exchange, lambda message: None)
        assert (await seen.next())["params"]["data"] == "one"
        seen.disconnect()
        assert seen.last_event_id is not None
        resumed = Exchange(b"")
        headers = [(k, v) for k, v in session.headers() if k != "content-type"]
        headers.append(("last-event-id", seen.last_event_id))
        nursery.start_soon(
            session.app, asgi_scope("GET", "/mcp", headers), resumed.receive, resumed.send
        )
        following = Stream(resumed, lambda message: None)
        await resumed.started.wait()
        assert resumed.status == 200
        gates.go.set()  # the tool goes on only now: what follows arrives live
        got = [await following.next() for _ in range(3)]
        with pytest.raises(EOFError):
            await following.next()
    assert [g.get("params", {}).get("data") for g in got[:2]] == ["two", "three"]
    assert got[2]["result"]["content"][0]["text"] == "gated done"


# ---------------------------------------------------------------------------- not resumable


async def test_a_2025_06_18_session_and_plain_methods_are_not_resumable() -> None:
    gates = Gates()
    async with open_session(resumable_server(gates), version="2025-06-18") as old:
        result = await drive_http(old.app, call("talk", 2, {"count": 0}), old.headers())
        assert (result.status, result.headers["content-type"]) == (200, "application/json")
    async with open_session(resumable_server(gates)) as new:
        listed = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        result = await drive_http(new.app, listed, new.headers())
        assert result.headers["content-type"] == "application/json"


async def test_resumable_off_answers_as_before() -> None:
    gates = Gates()
    async with open_session(resumable_server(gates, resumable=False)) as session:
        result = await drive_http(session.app, call("talk", 2, {"count": 0}), session.headers())
        assert (result.status, result.headers["content-type"]) == (200, "application/json")
        answer = await resume(session, "A" * 22 + "_0")
        assert (answer.status, answer.messages[0]["error"]) == (400, NOT_HELD)


async def test_a_stream_that_is_not_logged_is_never_closed_under_its_answer() -> None:
    gates = Gates()
    answered = {"closed: False"}
    async with open_session(resumable_server(gates), version="2025-06-18") as old:
        result = await drive_http(old.app, call("try_hang_up", 2), old.headers())
        assert (result.status, result.messages[-1]["id"]) == (200, 2)
        assert {c["text"] for c in result.messages[-1]["result"]["content"]} == answered
    async with open_session(resumable_server(gates, resumable=False)) as off:
        result = await drive_http(off.app, call("try_hang_up", 2), off.headers())
        assert (result.status, result.messages[-1]["id"]) == (200, 2)
        assert {c["text"] for c in result.messages[-1]["result"]["content"]} == answered
    async with open_client(resumable_server(gates)) as client:
        result = await client.call_tool("try_hang_up", {})
        assert {c["text"] for c in result["content"]} == answered


# ---------------------------------------------------------------------------- ids not held


async def test_ids_never_given_foreign_or_past_the_end_are_400_alike(
    opened: tuple[SessionClient, Gates],
) -> None:
    session, _ = opened
    done = await drive_http(session.app, call("talk", 2, {"count": 1}), session.headers())
    stream = frames(done.body)[0]["id"].rsplit("_", 1)[0]
    other = SessionClient(session.app)  # same principal, another session
    await other.initialize()
    for last in [
        "junk",
        "",
        f"{stream}_-1",
        f"{stream}_01",
        f"{stream}_3",  # past its end (0 priming, 1 message, 2 answer)
        "B" * 22 + "_0",  # well formed, never given
        f"{stream}_{'9' * 40}",
    ]:
        result = await resume(session, last)
        assert (result.status, result.messages) == (
            400,
            [{"jsonrpc": "2.0", "error": NOT_HELD}],
        ), last
    foreign = await resume(other, f"{stream}_0")
    assert (foreign.status, foreign.messages[0]["error"]) == (400, NOT_HELD)
    mine = await resume(session, f"{stream}_1")
    assert mine.messages[0]["result"]["content"][0]["text"] == "said 1"


async def test_an_expired_stream_and_an_ended_session_are_not_held(
    opened: tuple[SessionClient, Gates],
) -> None:
    session, _ = opened
    done = await drive_http(session.app, call("talk", 2, {"count": 0}), session.headers())
    first = frames(done.body)[0]["id"]
    runtime = session.app.runtime
    assert runtime is not None and runtime.sessions is not None
    assert runtime.sessions.stream_limits.retention_ms == 300_000
    assert (await resume(session, first)).status == 200
    assert await runtime.sessions.streams.delete_expired(2**62) == 1  # the sweep, later on
    result = await resume(session, first)
    assert (result.status, result.messages[0]["error"]) == (400, NOT_HELD)
    again = await drive_http(session.app, call("talk", 3, {"count": 0}), session.headers())
    assert await session.close() == 200
    gone = await resume(session, frames(again.body)[0]["id"])
    assert (gone.status, gone.messages[0]["error"]["code"]) == (404, -32001)
    assert await runtime.sessions.streams.delete_session(session.session_id or "") == 0


# ---------------------------------------------------------------------------- bounds


async def test_past_max_stream_events_notifications_are_sent_not_logged_the_answer_is(
    backend: str | None,
) -> None:
    gates = Gates()
    server = resumable_server(gates, backend, max_stream_events=3)
    async with open_session(server) as session:
        result = await drive_http(session.app, call("talk", 2, {"count": 5}), session.headers())
        events = [e for e in frames(result.body) if e.get("data")]
        assert len(events) == 6  # five messages and the answer, all sent
        named = [e.get("id", "").rsplit("_", 1)[-1] for e in events]
        assert named == ["1", "2", "3", "", "", "4"]
        stream = events[0]["id"].rsplit("_", 1)[0]
        replay = await resume(session, f"{stream}_0")
        assert [m.get("params", {}).get("data") for m in replay.messages] == [
            "message 0",
            "message 1",
            "message 2",
            None,
        ]
        assert replay.messages[-1]["result"]["content"][0]["text"] == "said 5"


async def test_a_session_keeps_its_newest_streams(backend: str | None) -> None:
    gates = Gates()
    server = resumable_server(gates, backend, max_streams_per_session=2)
    async with open_session(server) as session:
        firsts = []
        for n in range(3):
            done = await drive_http(session.app, call("talk", n, {"count": 0}), session.headers())
            firsts.append(frames(done.body)[0]["id"])
        oldest = await resume(session, firsts[0])
        assert (oldest.status, oldest.messages[0]["error"]) == (400, NOT_HELD)
        for kept in firsts[1:]:
            assert (await resume(session, kept)).status == 200


async def test_cancelled_while_detached_the_answer_is_logged(
    opened: tuple[SessionClient, Gates],
) -> None:
    """A client that dropped, then cancels: the call ends with -32800, which a resume
    gets as the stream's answer."""
    session, _ = opened
    exchange = Exchange(call("gated", 11))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            session.app, asgi_scope("POST", "/mcp", session.headers()), exchange.receive,
            exchange.send,
        )  # fmt: skip
        seen = Stream(exchange, lambda message: None)
        await seen.next()
        seen.disconnect()
        last = seen.last_event_id
        assert last is not None
        status = await session.notify("notifications/cancelled", {"requestId": 11})
        assert status == 202
    result = await resume(session, last)
    assert result.messages[-1]["error"]["code"] == -32800


# ---------------------------------------------------------------------------- floods


async def test_a_replay_flood_is_answered_and_holds_nothing(
    opened: tuple[SessionClient, Gates],
) -> None:
    """A hundred resumptions of one answered stream at once, and a hundred of forged ids:
    each replays (or is refused) in full, and afterwards nothing is listening or held."""
    session, _ = opened
    done = await drive_http(session.app, call("talk", 2, {"count": 50}), session.headers())
    first = frames(done.body)[0]["id"]
    answers: list[Any] = []

    async def again(last: str) -> None:
        answers.append(await resume(session, last))

    async with trio.open_nursery() as nursery:
        for n in range(100):
            nursery.start_soon(again, first)
            nursery.start_soon(again, f"{'F' * 21}{n % 10}_{n}")
    replays = [a for a in answers if a.status == 200]
    refusals = [a for a in answers if a.status == 400]
    assert (len(replays), len(refusals)) == (100, 100)
    assert all(len(a.messages) == 51 for a in replays)  # 50 messages and the answer
    assert all(a.messages[0]["error"] == NOT_HELD for a in refusals)
    runtime = session.app.runtime
    assert runtime is not None and runtime.bus.listener_count == 0
    assert (await session.call_tool("talk", {"count": 0}))["content"][0]["text"] == "said 0"


async def test_one_stream_per_session_keeps_the_newest(backend: str | None) -> None:
    server = resumable_server(Gates(), backend, max_streams_per_session=1)
    async with open_session(server) as session:
        firsts = []
        for n in range(3):
            done = await drive_http(session.app, call("talk", n, {"count": 0}), session.headers())
            firsts.append(frames(done.body)[0]["id"])
        assert [(await resume(session, first)).status for first in firsts] == [400, 400, 200]
