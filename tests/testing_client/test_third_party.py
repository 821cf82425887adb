"""``presa_trio.testing`` drives servers presa_trio did not write, over stdio and HTTP: the
official SDK's ``MCPServer`` (``mcp`` 2.x) and FastMCP 4, which speak 2026-07-28 and the
older era, and the published ``mcp`` 1.30 FastMCP (the older era only). Every message both
ways is checked against the negotiated version's schema, so each exchange below passing is a
conversation with no schema violation; list, call with arguments, read, progress, prompts,
completion, an older server's pushed elicitation, and each version forced in turn."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio

from presa_trio.testing import RemoteClient, RpcError, open_http, open_stdio

pytestmark = pytest.mark.e2e

ALL = ["sdk-stdio", "sdk-http", "fastmcp-stdio", "fastmcp-http", "mcp1-stdio", "mcp1-http"]
TOOLS = {
    "sdk": ["broken_weather", "add", "count", "weather", "fail"],
    "fastmcp": ["add", "count"],
    "mcp1": ["add", "fail", "ask", "count"],
}
NEWEST = {"sdk": "2026-07-28", "fastmcp": "2026-07-28", "mcp1": "2025-11-25"}
SERVER_NAMES = {"sdk": "sdk-server", "fastmcp": "fastmcp-server", "mcp1": "mcp1-server"}
GREETINGS = {
    "sdk": "hello from the SDK",
    "fastmcp": "hello from FastMCP",
    "mcp1": "hello from mcp 1.x",
}


def connect(how: str | list[str], **options: Any) -> AbstractAsyncContextManager[RemoteClient]:
    if isinstance(how, str):
        return open_http(how, **options)
    return open_stdio(how, **options)


def server_name(client: RemoteClient) -> str:
    if client.version == "2026-07-28":
        name: str = client.server["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
        return name
    return str(client.server["serverInfo"]["name"])


async def exercise(client: RemoteClient, which: str) -> None:
    """List, call with arguments, progress and read, exactly."""
    assert [t["name"] for t in await client.list_tools()] == TOOLS[which]
    added = await client.call_tool("add", {"a": 2, "b": 40})
    assert added["content"] == [{"type": "text", "text": "42"}]
    assert added["structuredContent"] == {"result": 42}
    before = len(client.notifications)
    counted = await client.call_tool("count", {"steps": 3}, progress_token="tok")
    assert counted["content"] == [{"type": "text", "text": "counted to 3"}]
    progress = [
        (n["params"]["progressToken"], n["params"]["progress"], n["params"]["total"])
        for n in client.notifications[before:]
        if n["method"] == "notifications/progress"
    ]
    assert progress == [("tok", 1, 3), ("tok", 2, 3), ("tok", 3, 3)]
    read = await client.read_resource("note://greeting")
    assert [c["text"] for c in read["contents"]] == [GREETINGS[which]]


@pytest.mark.parametrize("target", ALL, indirect=True)
async def test_it_negotiates_the_newest_era_the_server_speaks_and_works(
    target: tuple[str, str | list[str]],
) -> None:
    which, how = target
    with trio.fail_after(60):
        async with connect(how) as client:
            assert client.version == NEWEST[which]
            assert server_name(client) == SERVER_NAMES[which]
            await exercise(client, which)
            await client.ping()


@pytest.mark.parametrize(
    ("target", "version"),
    [
        ("sdk-stdio", "2025-11-25"),
        ("sdk-http", "2025-11-25"),
        ("sdk-stdio", "2025-06-18"),
        ("fastmcp-stdio", "2025-11-25"),
        ("fastmcp-http", "2025-06-18"),
        ("mcp1-stdio", "2025-06-18"),
        ("mcp1-http", "2025-06-18"),
    ],
    indirect=["target"],
)
async def test_a_forced_older_version_is_spoken_and_checked(
    target: tuple[str, str | list[str]], version: str
) -> None:
    which, how = target
    with trio.fail_after(60):
        async with connect(how, version=version) as client:
            assert (client.version, client.server["protocolVersion"]) == (version, version)
            await exercise(client, which)


@pytest.mark.parametrize("target", ["sdk-stdio", "sdk-http", "fastmcp-http"], indirect=True)
async def test_a_forced_2026_version_is_spoken(target: tuple[str, str | list[str]]) -> None:
    which, how = target
    with trio.fail_after(60):
        async with connect(how, version="2026-07-28") as client:
            assert client.server["supportedVersions"] == ["2026-07-28"]
            assert (client.version, client.session_id) == ("2026-07-28", None)
            await exercise(client, which)


@pytest.mark.parametrize("target", ["mcp1-stdio", "mcp1-http"], indirect=True)
async def test_forcing_2026_on_an_older_server_is_its_error(
    target: tuple[str, str | list[str]],
) -> None:
    _, how = target
    with trio.fail_after(60), pytest.raises(RpcError):
        async with connect(how, version="2026-07-28"):
            raise AssertionError("the server does not speak 2026-07-28")  # pragma: no cover


@pytest.mark.parametrize("target", ["sdk-stdio", "sdk-http"], indirect=True)
async def test_prompts_resources_and_completion_of_the_sdk(
    target: tuple[str, str | list[str]],
) -> None:
    _, how = target
    with trio.fail_after(60):
        async with connect(how) as client:
            assert [p["name"] for p in await client.list_prompts()] == ["greet"]
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            assert prompt["messages"] == [
                {"role": "user", "content": {"type": "text", "text": "Please greet Ada."}}
            ]
            assert [r["uri"] for r in await client.list_resources()] == ["note://greeting"]
            ref = {"type": "ref/prompt", "name": "greet"}
            completion = await client.complete(ref, {"name": "name", "value": "A"})
            assert completion["values"] == ["Ada", "Alan"]


@pytest.mark.parametrize("target", ["mcp1-stdio", "mcp1-http"], indirect=True)
async def test_an_older_servers_pushed_elicitation_is_answered(
    target: tuple[str, str | list[str]],
) -> None:
    _, how = target
    asked: list[dict[str, Any]] = []

    async def answer(key: str, request: dict[str, Any]) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        asked.append(request)
        return {"action": "accept", "content": {"name": "Ada"}}

    with trio.fail_after(60):
        async with connect(how) as client:
            result = await client.call_tool("ask", answer=answer)
            refused = await client.call_tool("ask")  # no answer: the request is refused
    assert result["content"] == [{"type": "text", "text": "Hello, Ada"}]
    assert [(r["method"], r["params"]["message"]) for r in asked] == [
        ("elicitation/create", "Your name?")
    ]
    assert refused["isError"] is True
    log = [n for n in client.notifications if n["method"] == "notifications/message"]
    assert [n["params"]["data"] for n in log] == ["asking for a name", "asking for a name"]
