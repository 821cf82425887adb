"""The Streamable HTTP surface, fuzzed: whatever arrives, the answer is well-formed and as
specified (status, JSON-RPC shape, schema, id echo, no tracebacks in answers or logs).

A small profile: ``EXAMPLES`` Hypothesis examples per strategy family, each family against
one run of a fresh fixture server. ``bench/fuzz.py`` runs the same families and oracle for
100,000 cases. The oracle is tested too (it must catch broken answers), and what the fuzzing
found is kept below as explicit examples.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest

from fixtures.conformance import build_server
from presa_trio.testing import Client

from .strategies import (
    FAMILIES,
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


@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_family(family: str) -> None:
    stats = await run_family(family, EXAMPLES)
    assert stats.failure_count == 0, "\n\n".join(stats.failures)
    assert stats.tracebacks == 0
    assert stats.scenarios >= EXAMPLES


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
