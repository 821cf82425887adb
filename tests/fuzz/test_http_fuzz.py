"""The Streamable HTTP surface, fuzzed: whatever arrives, the answer is well-formed and as
specified (status, JSON-RPC shape, schema, id echo, no tracebacks in answers or logs).

A small profile: ``EXAMPLES`` Hypothesis examples per strategy family, each family against
one run of a fresh fixture server. ``bench/fuzz.py`` runs the same families and oracle for
100,000 cases. The oracle is tested too (it must catch broken answers), and what the fuzzing
found is kept below as explicit examples. The older era's sessions have two families of
their own ("sessions", "pushes": tests/fuzz/sessions.py) and an oracle of their own, tested
here as well.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest

from fixtures.conformance import build_server
from presa_trio.testing import Client

from .sessions import (
    JSON_HEADERS,
    PUSH_TIMEOUT,
    SERVER_OPTIONS,
    Open,
    Timing,
    World,
    session_case,
    valid_initialize,
)
from .strategies import (
    FAMILIES,
    META_SERVER_INFO,
    Answer,
    Case,
    _listened,
    _message,
    check,
    exchange,
    good_headers,
    run_family,
)

EXAMPLES = 300
#: Families whose scenarios play many exchanges each (a session's opening, its steps, its
#: end): fewer of them, for about the time the others take.
FEWER = {"sessions": 150, "pushes": 100}


@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_family(family: str) -> None:
    examples = FEWER.get(family, EXAMPLES)
    stats = await run_family(family, examples)
    assert stats.failure_count == 0, "\n\n".join(stats.failures)
    assert stats.tracebacks == 0
    assert stats.scenarios >= examples


# ---------------------------------------------------------------------- explicit examples


def discover(**params: Any) -> dict[str, Any]:
    return _message("server/discover", params, {}, 7)


async def play(body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None) -> Answer:
    app = build_server().asgi_app()
    async with app.lifespan():
        return await exchange(app, Case(json.dumps(body).encode(), headers or good_headers(body)))


@pytest.mark.parametrize("uri", ["", "a b", "http://x/a\\b", "%zz", "test://ok/%4"])
async def test_a_prompt_given_a_non_uri_refuses_it_as_invalid_params(
    uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The fixture prompt embeds its ``resourceUri`` argument (free text: prompt arguments
    have no schema) as a resource ``uri``, which must be a URI. Before, outbound validation
    caught the invalid result and answered 500 (the one 500 the first 100k run met); the
    prompt now refuses the argument itself."""
    params = {"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": uri}}
    body = _message("prompts/get", params, {}, 3)
    app = build_server().asgi_app()
    async with app.lifespan():
        case = Case(json.dumps(body).encode(), good_headers(body))
        with caplog.at_level(logging.WARNING):
            answer = await exchange(app, case)
        assert answer.status == 400
        assert json.loads(answer.body)["error"] == {
            "code": -32602,
            "message": f"resourceUri must be a URI, got {uri!r}",
        }
        assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
        assert check(case, answer, Client(app), caplog.records) == []
        params["arguments"] = {"resourceUri": "test://ok/%41?q=1#f"}
        ok = _message("prompts/get", params, {}, 4)
        answer = await exchange(app, Case(json.dumps(ok).encode(), good_headers(ok)))
        assert answer.status == 200
        assert json.loads(answer.body)["result"]["messages"][0]["content"]["resource"]["uri"] == (
            "test://ok/%41?q=1#f"
        )


@pytest.mark.parametrize(
    ("name", "values"),
    [
        (b"origin", [b"http://evil.com", b"http://localhost"]),
        (b"host", [b"evil.com", b"localhost"]),
    ],
)
async def test_a_repeated_host_or_origin_with_a_refused_value_is_refused(
    name: bytes, values: list[bytes]
) -> None:
    body = discover()
    headers = [(k, v) for k, v in good_headers(body) if k != name] + [(name, v) for v in values]
    assert (await play(body, headers)).status == 403


async def test_a_malformed_origin_that_a_lax_parser_reads_as_loopback_is_refused() -> None:
    body = discover()
    assert (
        await play(body, [*good_headers(body), (b"origin", b"http://evil.com\\@localhost")])
    ).status == 403


async def test_an_older_eras_notification_without_a_session_is_refused_like_its_requests() -> None:
    """Found by the "rpc" family once the server served the initialize era: a notification
    under an older version header names no session, and is refused 400 (-32600) as a
    request would be; the oracle used to want 202 for every notification."""
    body = {k: v for k, v in discover().items() if k != "id"}
    headers = [(k, v) for k, v in good_headers(discover()) if k != b"mcp-protocol-version"]
    headers.append((b"mcp-protocol-version", b"2025-06-18"))
    app = build_server().asgi_app()
    async with app.lifespan():
        case = Case(json.dumps(body).encode(), headers)
        answer = await exchange(app, case)
        assert answer.status == 400
        assert json.loads(answer.body)["error"] == {
            "code": -32600,
            "message": "Bad Request: Mcp-Session-Id header is required",
        }
        assert check(case, answer, Client(app), []) == []
        taken = Answer(202, [(b"content-type", b"text/plain; charset=utf-8")], b"", complete=True)
        assert check(case, taken, Client(app), []) != []


# ---------------------------------------------------------------------- the oracle has teeth


async def _served() -> tuple[Case, Answer, Client]:
    body = _message("tools/call", {"name": "greet", "arguments": {"name": "Ada"}}, {}, 41)
    app = build_server().asgi_app()
    async with app.lifespan():
        case = Case(json.dumps(body).encode(), good_headers(body))
        return case, await exchange(app, case), Client(app)


def _json(status: int, message: dict[str, Any], length: int | None = None) -> Answer:
    body = json.dumps(message).encode()
    size = str(len(body) if length is None else length).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", size)]
    return Answer(status, headers, body, complete=True)


def _sse(*messages: bytes) -> Answer:
    body = b"".join(b"event: message\ndata: " + m + b"\n\n" for m in messages)
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    return Answer(200, headers, body, complete=True)


def _changed(message: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**message, **fields}


def _result(message: dict[str, Any], **fields: Any) -> dict[str, Any]:
    result = {k: v for k, v in message["result"].items() if k not in fields or fields[k]}
    result.update({k: v for k, v in fields.items() if v})
    return {**message, "result": result}


PROGRESS = (
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
)
BROKEN: dict[str, Any] = {
    "status 500 for a result": lambda m, raw: _json(500, m),
    "status 418": lambda m, raw: _json(418, m),
    "id null": lambda m, raw: _json(200, _changed(m, id=None)),
    "id as a string": lambda m, raw: _json(200, _changed(m, id="41")),
    "no serverInfo": lambda m, raw: _json(200, _result(m, _meta=None)),
    "no resultType": lambda m, raw: _json(200, _result(m, resultType=None)),
    "content not a list (schema)": lambda m, raw: _json(200, _result(m, content=1)),
    "jsonrpc 1.0": lambda m, raw: _json(200, _changed(m, jsonrpc="1.0")),
    "wrong content-length": lambda m, raw: _json(200, m, length=1),
    "never finished": lambda m, raw: Answer(200, [(b"content-type", b"application/json")], raw),
    "two responses in SSE": lambda m, raw: _sse(raw, raw),
    "SSE ending with a notification": lambda m, raw: _sse(raw, PROGRESS),
    "202 for a request": lambda m, raw: Answer(202, [], b"", complete=True),
    "an unexplained 500": lambda m, raw: _json(
        500, {"jsonrpc": "2.0", "id": 41, "error": {"code": -32603, "message": "Internal error"}}
    ),
    "a traceback in a message": lambda m, raw: _json(
        400, {"jsonrpc": "2.0", "id": 41, "error": {"code": -32602, "message": "KeyError: 'x'"}}
    ),
    "-32601 with 400": lambda m, raw: _json(
        400, {"jsonrpc": "2.0", "id": 41, "error": {"code": -32601, "message": "no"}}
    ),
    "-32021 for what was declared": lambda m, raw: _json(
        400,
        {
            "jsonrpc": "2.0",
            "id": 41,
            "error": {"code": -32021, "message": "no", "data": {"requiredCapabilities": {}}},
        },
    ),
}


@pytest.mark.parametrize("breakage", sorted(BROKEN))
async def test_the_oracle_catches_a_broken_answer(breakage: str) -> None:
    case, answer, client = await _served()
    assert check(case, answer, client, []) == []
    broken = BROKEN[breakage](json.loads(answer.body), answer.body)
    assert check(case, broken, client, []) != []


async def test_the_oracle_catches_a_logged_traceback() -> None:
    case, answer, client = await _served()
    record = logging.LogRecord("presa_trio", logging.ERROR, __file__, 1, "boom", (), None)
    try:
        raise KeyError("x")
    except KeyError:
        record.exc_info = sys.exc_info()
    assert check(case, answer, client, [record]) == ["traceback logged: boom"]


def test_the_listen_oracle_catches_news_nobody_asked_for() -> None:
    meta = b'"_meta":{"io.modelcontextprotocol/subscriptionId":"listen"}'
    ack = (
        b'{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{'
        + meta
        + b',"notifications":{"toolsListChanged":true}}}'
    )
    stray = b'{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{' + meta
    answer = _sse(ack, stray + b"}}")
    answer.hung_up = True
    assert _listened({"toolsListChanged"}, set(), answer, None) == [
        "sent notifications/prompts/list_changed, which the client did not ask for"
    ]
    unheard = _listened({"toolsListChanged"}, {"notifications/tools/list_changed"}, answer, None)
    assert any("never heard" in p for p in unheard)


# ---------------------------------------------------------------------- the session oracle too


async def _on_a_session(session_id: str | None = None) -> tuple[Case, Answer, Client]:
    """A ``tools/list`` on a live session (or on ``session_id``, which names none), played
    and judged by the session oracle."""
    app = build_server(**SERVER_OPTIONS).asgi_app()
    async with app.lifespan():
        world = World()
        opening = valid_initialize("2025-11-25", {})
        headers = [*JSON_HEADERS, (b"mcp-tenant", b"alice")]
        opened = await exchange(app, Case(json.dumps(opening).encode(), headers))
        sid = opened.header(b"mcp-session-id")
        assert sid is not None
        world.named["a"] = Open(sid, "alice", "2025-11-25")
        named = [(b"mcp-session-id", (session_id or sid).encode())]
        on = [*headers, *named, (b"mcp-protocol-version", b"2025-11-25")]
        body = json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}).encode()
        case = session_case(world, "teeth", body, on)
        return case, await exchange(app, case), Client(app)


def _with_result(message: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**message, "result": {**message["result"], **fields}}


SESSION_BROKEN: dict[str, Any] = {
    "a 2026-07-28 resultType": lambda m: _json(200, _with_result(m, resultType="complete")),
    "a serverInfo stamp": lambda m: _json(
        200, _with_result(m, _meta={META_SERVER_INFO: {"name": "x", "version": "1"}})
    ),
    "a result breaking the version's schema": lambda m: _json(200, _with_result(m, tools=1)),
    "404 for a live session": lambda m: _json(
        404, {"jsonrpc": "2.0", "id": 8, "error": {"code": -32001, "message": "Session not found"}}
    ),
    "an error on 400 for a live session": lambda m: _json(
        400, {"jsonrpc": "2.0", "id": 8, "error": {"code": -32602, "message": "no"}}
    ),
    "an internal error": lambda m: _json(
        200, {"jsonrpc": "2.0", "id": 8, "error": {"code": -32603, "message": "Internal error"}}
    ),
    "the id not echoed": lambda m: _json(200, _changed(m, id="8")),
    "a request pushed on a tools/list": lambda m: _sse(
        b'{"jsonrpc":"2.0","id":"p","method":"roots/list"}', json.dumps(m).encode()
    ),
    "a session id on a result": lambda m: Answer(
        200,
        [*_json(200, m).headers, (b"mcp-session-id", b"x" * 32)],
        json.dumps(m).encode(),
        complete=True,
    ),
    "202 for a request": lambda m: Answer(
        202, [(b"content-type", b"text/plain; charset=utf-8")], b"", complete=True
    ),
}
GONE_BROKEN: dict[str, Any] = {
    "another message": lambda m: _json(
        404, {**m, "error": {"code": -32001, "message": "Session expired"}}
    ),
    "HTTP 200": lambda m: _json(200, m),
    "HTTP 400": lambda m: _json(400, m),
    "-32600 on 404": lambda m: _json(404, {**m, "error": {"code": -32600, "message": "no"}}),
}


@pytest.mark.parametrize("breakage", sorted(SESSION_BROKEN))
async def test_the_session_oracle_catches_a_broken_answer(breakage: str) -> None:
    case, answer, client = await _on_a_session()
    assert case.oracle is not None
    assert case.oracle(case, answer, client, []) == []
    broken = SESSION_BROKEN[breakage](json.loads(answer.body))
    assert case.oracle(case, broken, client, []) != []


@pytest.mark.parametrize("breakage", sorted(GONE_BROKEN))
async def test_the_session_oracle_catches_a_broken_404(breakage: str) -> None:
    case, answer, client = await _on_a_session("no-such-session")
    assert case.oracle is not None
    assert answer.status == 404
    assert case.oracle(case, answer, client, []) == []
    broken = GONE_BROKEN[breakage](json.loads(answer.body))
    assert case.oracle(case, broken, client, []) != []


def test_a_push_timeout_is_justified_only_by_a_late_or_missing_answer() -> None:
    timing = Timing({"p1": 1.0, "p2": 2.0}, {"p1": 1.0 + PUSH_TIMEOUT / 2})
    assert timing.may_time_out()  # p2 was never answered
    timing.posted["p2"] = 2.0 + PUSH_TIMEOUT / 2
    assert not timing.may_time_out()  # both answers were in before their deadlines
    timing.posted["p2"] = 2.0 + 2 * PUSH_TIMEOUT
    assert timing.may_time_out()  # p2's answer may have come after its deadline
