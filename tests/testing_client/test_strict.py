"""``strict=True``: a tool's ``isError`` result raises ``ToolError`` with its text, and
``structuredContent`` that breaks the tool's declared ``outputSchema`` (or is missing) raises
``OutputSchemaError`` naming the tool, the pointer and the reason; the tools are listed once
per client. With every client: ``Client`` and ``SessionClient`` in process, ``RemoteClient``
over HTTP against presa_trio under hypercorn (both eras), and against the official SDK's
server and the ``mcp`` 1.30 server. ``strict=False``, the default, hands back what the
server sent."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio
from support import strict_app
from support.servers import SUPPORT, running

from presa_trio.testing import (
    OutputSchemaError,
    SchemaViolationError,
    ToolError,
    open_client,
    open_http,
    open_session,
    open_stdio,
)

BROKE = "the result breaks the tool's outputSchema"
CELSIUS = 'at /structuredContent/celsius: "warm" is not of type "number"'
MISSING = "at /structuredContent: missing, but the tool declares an outputSchema"
# tool -> (what strict raises, its exact text)
STRICT = {
    "misreading": (
        ToolError,
        "Tool misreading returned output that does not match its outputSchema",
    ),
    "handmade": (
        OutputSchemaError,
        f"tools/call handmade: {BROKE}\n  {CELSIUS}",
    ),
    "bare": (
        OutputSchemaError,
        f"tools/call bare: {BROKE}\n  {MISSING}",
    ),
    "refuse": (ToolError, "no data for Oslo"),
}
# tool -> what strict=False hands back, less _meta
LAX = {
    "misreading": {
        "content": [
            {
                "type": "text",
                "text": "Tool misreading returned output that does not match its outputSchema",
            }
        ],
        "isError": True,
    },
    "handmade": {
        "content": [{"type": "text", "text": "Oslo: warm"}],
        "structuredContent": {"city": "Oslo", "celsius": "warm"},
    },
    "bare": {"content": [{"type": "text", "text": "Oslo"}]},
    "refuse": {"content": [{"type": "text", "text": "no data for Oslo"}], "isError": True},
}
KEPT = {"reading": {"city": "Oslo", "celsius": 21.5}, "plain": {"result": "Oslo is fine"}}


def essentials(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("_meta", "resultType")}


@pytest.fixture(scope="module")
def presa_url() -> Iterator[str]:
    with running("strict_app:app", SUPPORT) as served:
        yield f"http://127.0.0.1:{served.port}/mcp"


def presa_client(
    how: str, request: pytest.FixtureRequest, **options: Any
) -> AbstractAsyncContextManager[Any]:
    if how == "client":
        return open_client(strict_app.server, **options)
    if how == "session":
        return open_session(strict_app.server, **options)
    url = request.getfixturevalue("presa_url")
    return open_http(url, version="2025-11-25" if how == "http-old" else None, **options)


HOW = [
    "client",
    "session",
    pytest.param("http", marks=pytest.mark.e2e),
    pytest.param("http-old", marks=pytest.mark.e2e),
]


@pytest.mark.parametrize("how", HOW)
async def test_strict_raises_for_each_broken_result_and_passes_the_rest(
    how: str, request: pytest.FixtureRequest
) -> None:
    listed = strict_app.LISTED["count"]
    with trio.fail_after(30):
        async with presa_client(how, request, strict=True) as client:
            for name, (kind, text) in STRICT.items():
                with pytest.raises(kind) as raised:
                    await client.call_tool(name, {"city": "Oslo"})
                assert type(raised.value) is kind
                assert str(raised.value) == text
            for name, structured in KEPT.items():
                result = await client.call_tool(name, {"city": "Oslo"})
                assert result["structuredContent"] == structured
    if how in ("client", "session"):  # the same process: the server's count is this test's
        assert strict_app.LISTED["count"] == listed + 1


def test_an_output_schema_error_is_a_schema_violation() -> None:
    assert issubclass(OutputSchemaError, SchemaViolationError)


@pytest.mark.parametrize("how", HOW)
async def test_not_strict_hands_back_what_the_server_sent(
    how: str, request: pytest.FixtureRequest
) -> None:
    listed = strict_app.LISTED["count"]
    with trio.fail_after(30):
        async with presa_client(how, request) as client:
            for name, expected in LAX.items():
                assert essentials(await client.call_tool(name, {"city": "Oslo"})) == expected
    assert how not in ("client", "session") or strict_app.LISTED["count"] == listed


async def test_the_violation_carries_the_tool_and_its_pointers() -> None:
    async with open_client(strict_app.server, strict=True) as client:
        with pytest.raises(OutputSchemaError) as raised:
            await client.call_tool("handmade", {"city": "Oslo"})
    assert raised.value.tool == "handmade"
    assert [(v.pointer, v.message) for v in raised.value.violations] == [
        ("/structuredContent/celsius", '"warm" is not of type "number"')
    ]


# ---------------------------------------------------------------------------- other servers


def third_party(
    target: tuple[str, str | list[str]], **options: Any
) -> AbstractAsyncContextManager[Any]:
    _, how = target
    if isinstance(how, str):
        return open_http(how, **options)
    return open_stdio(how, **options)


@pytest.mark.e2e
@pytest.mark.parametrize("target", ["sdk-stdio", "sdk-http"], indirect=True)
async def test_a_third_party_tool_breaking_its_schema_raises_with_the_pointer(
    target: tuple[str, str | list[str]],
) -> None:
    with trio.fail_after(60):
        async with third_party(target, strict=True) as client:
            with pytest.raises(OutputSchemaError) as raised:
                await client.call_tool("broken_weather", {"city": "Oslo"})
            with pytest.raises(ToolError) as failed:
                await client.call_tool("fail")
            kept = await client.call_tool("weather", {"city": "Oslo"})
        async with third_party(target) as lax:
            sent = await lax.call_tool("broken_weather", {"city": "Oslo"})
    assert str(raised.value) == (f"tools/call broken_weather: {BROKE}\n  {CELSIUS}")
    assert str(failed.value) == "Error executing tool fail"
    assert kept["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    assert sent["structuredContent"] == {"city": "Oslo", "celsius": "warm"}


@pytest.mark.e2e
@pytest.mark.parametrize("target", ["mcp1-stdio", "mcp1-http"], indirect=True)
async def test_an_older_third_party_servers_error_result_raises_its_text(
    target: tuple[str, str | list[str]],
) -> None:
    with trio.fail_after(60):
        async with third_party(target, strict=True) as client:
            with pytest.raises(ToolError) as failed:
                await client.call_tool("fail")
            added = await client.call_tool("add", {"a": 1, "b": 2})
    assert str(failed.value) == "Error executing tool fail: it failed on purpose"
    assert added["structuredContent"] == {"result": 3}
