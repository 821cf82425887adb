"""``presa_trio.testing``'s client of any server answers what a server asks with one
``answer(key, request)``: a 2026-07-28 ``input_required`` round (retried with the answers and
the server's ``requestState``), and the same question pushed as ``elicitation/create`` in an
``initialize`` session; against presa_trio over HTTP under hypercorn and over stdio
(``presa-trio serve --stdio``). Without an answer the round comes back as it is."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio
from support.servers import SUPPORT, running

from presa_trio.testing import RemoteClient, open_http, open_stdio

pytestmark = pytest.mark.e2e

SERVE = [sys.executable, "-m", "presa_trio", "serve", "strict_app:server", "--stdio"]


@pytest.fixture(scope="module")
def presa_url() -> Iterator[str]:
    with running("strict_app:app", SUPPORT) as served:
        yield f"http://127.0.0.1:{served.port}/mcp"


def connect(
    how: str, request: pytest.FixtureRequest, **options: Any
) -> AbstractAsyncContextManager[RemoteClient]:
    if how == "stdio":
        return open_stdio(SERVE, cwd=SUPPORT, **options)
    return open_http(request.getfixturevalue("presa_url"), **options)


@pytest.mark.parametrize("how", ["http", "stdio"])
@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
async def test_one_answer_function_answers_both_eras(
    how: str, version: str, request: pytest.FixtureRequest
) -> None:
    asked: list[tuple[str, str]] = []

    def answer(key: str, question: dict[str, Any]) -> dict[str, Any]:
        asked.append((question["method"], question["params"]["message"]))
        return {"action": "accept", "content": {"name": "Ada"}}

    with trio.fail_after(30):
        async with connect(how, request, version=version, answer=answer) as client:
            result = await client.call_tool("ask")
    assert result["content"] == [{"type": "text", "text": "Hello, Ada"}]
    assert asked == [("elicitation/create", "Your name?")]


@pytest.mark.parametrize("how", ["http", "stdio"])
async def test_a_2026_round_without_an_answer_comes_back_as_it_is(
    how: str, request: pytest.FixtureRequest
) -> None:
    with trio.fail_after(30):
        async with connect(how, request) as client:
            result = await client.call_tool("ask")
            answered = await client.call_tool(
                "ask", answer=lambda key, question: {"action": "decline"}
            )
    assert result["resultType"] == "input_required"
    assert [r["method"] for r in result["inputRequests"].values()] == ["elicitation/create"]
    assert answered["content"] == [{"type": "text", "text": "no name"}]


async def test_an_answer_that_is_not_a_result_is_a_clear_error(
    request: pytest.FixtureRequest,
) -> None:
    with trio.fail_after(30):
        async with connect("stdio", request, version="2025-11-25") as client:
            with pytest.raises(TypeError) as raised:
                await client.call_tool("ask", answer=lambda key, question: "Ada")
    assert str(raised.value) == "answer() must return the result of elicitation/create, got 'Ada'"
