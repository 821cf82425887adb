"""A server that breaks the schema makes ``presa_trio.testing``'s client of any server raise
``SchemaViolationError`` naming the exact ``$def`` and JSON pointer, over stdio and over HTTP
(tests/support/broken_server.py, each break one wrong answer in an otherwise correct
conversation), in 2026-07-28 and in an ``initialize`` session; with ``validate=False`` the
same conversation passes, so the break is the only fault."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager

import pytest
import trio
from support.broken_server import CALL_ANSWERS
from support.servers import SUPPORT, running

from presa_trio.testing import RemoteClient, SchemaViolationError, open_http, open_stdio

pytestmark = pytest.mark.e2e

SCRIPT = str(SUPPORT / "broken_server.py")

# break -> the exact text of the SchemaViolationError its tools/call raises
ON_CALL = {
    "is-error-type": 'CallToolResult at /isError: "no" is not of type "boolean"',
    "content-not-a-list": 'CallToolResult at /content: "not a list" is not of type "array"',
    "result-type-typo": (
        "Result at /resultType: 'completed' is not a result type of 2026-07-28"
        " (complete, input_required)"
    ),
    "task-undeclared": (
        "Result at /resultType: 'task' is not a result type of 2026-07-28 (complete,"
        " input_required); 'task' needs the Tasks extension, which the request did not declare"
    ),
    "progress-type": 'ProgressNotification at /params/progress: "half" is not of type "number"',
    "request-on-stream": "JSONRPCMessage at /: a 2026-07-28 server sent a request (roots/list)",
    "old-is-error-type": 'CallToolResult at /isError: "no" is not of type "boolean"',
}


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    with running("broken_server:app", SUPPORT) as served:
        yield served.port


def connect(
    transport: str, broken: str, **options: object
) -> AbstractAsyncContextManager[RemoteClient]:
    if transport == "stdio":
        return open_stdio([sys.executable, SCRIPT, broken], **options)  # type: ignore[arg-type]
    port = options.pop("port")
    return open_http(f"http://127.0.0.1:{port}/{broken}", **options)  # type: ignore[arg-type]


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def options(transport: str, request: pytest.FixtureRequest) -> dict[str, object]:
    return {"port": request.getfixturevalue("http_port")} if transport == "http" else {}


@pytest.mark.parametrize("broken", sorted(ON_CALL))
async def test_a_broken_answer_raises_naming_its_def_and_pointer(
    transport: str, options: dict[str, object], broken: str
) -> None:
    with trio.fail_after(30):
        async with connect(transport, broken, **options) as client:
            assert client.version == ("2025-11-25" if broken.startswith("old-") else "2026-07-28")
            with pytest.raises(SchemaViolationError) as raised:
                await client.call_tool("echo", {}, progress_token="p")
    assert str(raised.value) == ON_CALL[broken]


@pytest.mark.parametrize("broken", sorted(ON_CALL))
async def test_without_validation_the_same_conversation_passes(
    transport: str, options: dict[str, object], broken: str
) -> None:
    with trio.fail_after(30):
        async with connect(transport, broken, validate=False, **options) as client:
            result = await client.call_tool("echo", {}, progress_token="p")
    assert result == CALL_ANSWERS[broken][-1]


async def test_a_broken_handshake_raises_before_the_block(
    transport: str, options: dict[str, object]
) -> None:
    with trio.fail_after(30), pytest.raises(SchemaViolationError) as raised:
        async with connect(transport, "old-initialize-no-info", **options):
            raise AssertionError("the handshake was broken")  # pragma: no cover
    assert str(raised.value) == 'InitializeResult at /: "serverInfo" is a required property'


async def test_a_correct_conversation_passes(transport: str, options: dict[str, object]) -> None:
    for broken, version in (("none", "2026-07-28"), ("old-none", "2025-11-25")):
        with trio.fail_after(30):
            async with connect(transport, broken, **options) as client:
                assert client.version == version
                assert [t["name"] for t in await client.list_tools()] == ["echo"]
                result = await client.call_tool("echo", {})
        assert result["content"] == [{"type": "text", "text": "hi"}]
