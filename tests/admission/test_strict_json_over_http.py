"""Strict JSON at the HTTP edge: lone surrogates, NaN/Infinity and deep nesting are each one
parse error answered once, the same calls without the bad bits are served, and a lone surrogate
in an id logs nothing. (The parser on its own: tests/unit/test_strict_json.py.)"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator

import pytest
from support.answers import errors_logged, only_error, still_serving
from support.asgi_scope import headers
from support.raw_asgi import asgi, body_of, headers_of

from presa_trio import Server
from presa_trio.testing import Client, drive

V = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def surrogate_bodies() -> Iterator[bytes]:
    params = json.dumps({"_meta": META})
    ids = [rb'"\ud800"', rb'"\udfff"', rb'"a\udc00"', rb'"\udc00\ud800"', b'"\xed\xa0\x80"']
    for raw_id in itertools.islice(itertools.cycle(ids), 200):
        yield (
            b'{"jsonrpc":"2.0","id":'
            + raw_id
            + b',"method":"server/discover","params":'
            + params.encode()
            + b"}"
        )


async def test_lone_surrogate_ids_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    app = Server("surrogates", "1").asgi_app()
    messages = set()
    async with app.lifespan():
        for body in surrogate_bodies():
            start, answer_ = await asgi(app, body, headers_of("server/discover"))
            assert start["status"] == 400 and "id" not in answer_
            assert answer_["error"]["code"] == -32700
            messages.add(answer_["error"]["message"])
        # A valid surrogate pair is ordinary text: served.
        pair = body_of("server/discover", request_id="\U0001f600")
        start, answer_ = await asgi(app, pair, headers_of("server/discover"))
        assert start["status"] == 200 and answer_["id"] == "\U0001f600"
    assert messages == {
        "Parse error: a string holds an unpaired surrogate",
        "Parse error: body is not valid JSON",
    }
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [r for r in caplog.records if r.exc_info] == []


def call_body(
    name: str, arguments_json: str = "{}", *, request_id: str = "1", meta_json: str | None = None
) -> str:
    """A ``tools/call`` as JSON text, so tests can put in it what ``json.dumps`` never writes."""
    meta = meta_json if meta_json is not None else json.dumps(META)
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":{json.dumps(name)},"arguments":{arguments_json},"_meta":{meta}}}}}'
    )


def deep(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


SURROGATE_BYTES = call_body("slow_compute", '{"label":"@"}').encode().replace(b"@", b"\xed\xa0\x80")
WITH_NAN = json.dumps(META)[:-1] + ',"x":NaN}'
WITH_INFINITY = json.dumps(META)[:-1] + ',"progressToken":Infinity}'
DEEP_OBJECTS = '{"address":' + '{"a":' * 900 + "1" + "}" * 900 + "}"


#: id -> (the tool the Mcp-Name header names, a body that is not strict JSON)
PARSE_ERRORS: dict[str, tuple[str, str | bytes]] = {
    "lone surrogate id": (
        "test_simple_text",
        call_body("test_simple_text", request_id='"\\ud800"'),
    ),
    "lone low surrogate": ("slow_compute", call_body("slow_compute", '{"label":"a\\udc00b"}')),
    "high then a letter": ("slow_compute", call_body("slow_compute", '{"label":"\\ud800\\u0041"}')),
    "utf-8 surrogate bytes": ("slow_compute", SURROGATE_BYTES),
    "NaN in _meta": ("test_simple_text", call_body("test_simple_text", meta_json=WITH_NAN)),
    "Infinity in _meta": (
        "test_simple_text",
        call_body("test_simple_text", meta_json=WITH_INFINITY),
    ),
    "slow_compute 300 deep": (
        "slow_compute",
        call_body("slow_compute", '{"label":' + deep(300) + "}"),
    ),
    "slow_compute 900 deep": (
        "slow_compute",
        call_body("slow_compute", '{"label":' + deep(900) + "}"),
    ),
    "2020-12 tool 300 deep": (
        "json_schema_2020_12_tool",
        call_body("json_schema_2020_12_tool", '{"name":' + deep(300) + "}"),
    ),
    "2020-12 tool 900 deep": (
        "json_schema_2020_12_tool",
        call_body("json_schema_2020_12_tool", DEEP_OBJECTS),
    ),
}


@pytest.mark.parametrize(("tool", "body"), list(PARSE_ERRORS.values()), ids=list(PARSE_ERRORS))
async def test_strict_json_over_http(
    client: Client, tool: str, body: str | bytes, caplog: pytest.LogCaptureFixture
) -> None:
    result = await drive(client.app, body, headers("tools/call", mcp_name=tool))
    assert result.status == 400, result.body
    error = only_error(result)
    assert error["code"] == -32700
    assert error["message"].startswith("Parse error")
    assert "id" not in result.messages[0]
    await still_serving(client.app)
    assert errors_logged(caplog) == []


async def test_the_same_calls_without_the_bad_bits_are_served(client: Client) -> None:
    # Guards the parametrized bodies above: with valid JSON in place they reach the tool.
    fine = call_body("slow_compute", '{"label":"\\ud83d\\ude00"}')
    result = await drive(client.app, fine, headers("tools/call", mcp_name="slow_compute"))
    assert result.status == 200
    assert result.response is not None
    assert result.response["result"]["content"][0]["text"] == "Completed \U0001f600"
    nested_ok = call_body("json_schema_2020_12_tool", '{"email":"e","name":"n"}')
    result = await drive(
        client.app, nested_ok, headers("tools/call", mcp_name="json_schema_2020_12_tool")
    )
    assert result.status == 200 and result.response is not None
    assert result.response["result"].get("isError") is not True
