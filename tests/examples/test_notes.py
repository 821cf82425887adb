"""examples/notes.py: pydantic models in and out, a lifespan-held SQLite connection, a typed
resource-template variable and a typed prompt argument, through the schema-checking client."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.notes import server
from presa_trio.testing import RpcError, open_client


@pytest.fixture(autouse=True)
def notes_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "notes.db"
    monkeypatch.setenv("NOTES_DB", str(path))
    return path


async def test_notes_go_in_as_models_and_come_back_structured() -> None:
    async with open_client(server) as client:
        added = await client.call_tool(
            "add_note", {"note": {"title": "milk", "body": "2 l", "tags": ["shop", "shop"]}}
        )
        note = added["structuredContent"]
        assert set(note) == {"id", "title", "body", "tags", "created"}
        assert (note["id"], note["title"], note["body"], note["tags"]) == (
            1,
            "milk",
            "2 l",
            ["shop"],
        )
        assert note["created"].endswith(("Z", "+00:00"))
        await client.call_tool("add_note", {"note": {"title": "call ada", "tags": ["work"]}})

        listed = await client.call_tool("list_notes", {"tag": "shop"})
        assert [n["title"] for n in listed["structuredContent"]["result"]] == ["milk"]
        everything = await client.call_tool("list_notes", {"limit": "5"})  # "5": lax, as the SDK
        assert [n["id"] for n in everything["structuredContent"]["result"]] == [1, 2]


async def test_the_schemas_carry_the_models_and_their_constraints() -> None:
    async with open_client(server) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
    note = tools["add_note"]["inputSchema"]["properties"]["note"]
    assert note["properties"]["title"]["minLength"] == 1
    assert note["properties"]["title"]["maxLength"] == 200
    assert note["required"] == ["title"]
    limit = tools["list_notes"]["inputSchema"]["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 100, 20)
    output = tools["add_note"]["outputSchema"]
    assert output["properties"]["created"] == {
        "format": "date-time",
        "title": "Created",
        "type": "string",
    }


async def test_bad_arguments_are_tool_errors_naming_the_field() -> None:
    async with open_client(server) as client:
        empty = await client.call_tool("add_note", {"note": {"title": ""}})
        too_many = await client.call_tool("list_notes", {"limit": 500})
    assert empty["isError"] is True
    assert empty["content"] == [
        {
            "type": "text",
            "text": "Invalid arguments: note/title: String should have at least 1 character",
        }
    ]
    assert too_many["isError"] is True
    assert too_many["content"][0]["text"] == (
        "Invalid arguments: limit: Input should be less than or equal to 100"
    )


async def test_a_note_is_a_resource_and_a_prompt_by_its_integer_id() -> None:
    async with open_client(server) as client:
        await client.call_tool("add_note", {"note": {"title": "plan", "body": "ship it"}})
        read = await client.read_resource("notes://1")
        assert read["contents"][0]["uri"] == "notes://1"
        assert '"title":"plan"' in read["contents"][0]["text"]
        prompt = await client.get_prompt("summarize", {"note_id": "1", "words": "20"})
        text = prompt["messages"][0]["content"]["text"]
        assert text == "Summarize this note in at most 20 words:\n\nplan\n\nship it"
        with pytest.raises(RpcError) as missing:
            await client.read_resource("notes://9")
        assert (missing.value.code, missing.value.data) == (-32602, {"uri": "notes://9"})
        with pytest.raises(RpcError) as not_a_number:
            await client.get_prompt("summarize", {"note_id": "one"})
        assert not_a_number.value.code == -32602


async def test_the_connection_lives_as_long_as_the_run(notes_db: Path) -> None:
    async with open_client(server) as client:
        await client.call_tool("add_note", {"note": {"title": "kept"}})
    async with open_client(server) as client:  # a second run of the same server
        listed = await client.call_tool("list_notes", {})
    assert [n["title"] for n in listed["structuredContent"]["result"]] == ["kept"]
    assert notes_db.stat().st_size > 0  # noqa: ASYNC240 (a test's one look at its file)
