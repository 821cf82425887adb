"""examples/file_search.py: progress while it walks, a sync helper in a worker thread, typed
arguments with constraints, a list of dataclasses as the structured result, and a root that
no argument can leave."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.file_search import server
from presa_trio.testing import open_client


@pytest.fixture(autouse=True)
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("intro\nthe needle here\nend\n")
    (tmp_path / "docs" / "b.txt").write_text("needle one\nneedle two\n")
    (tmp_path / "docs" / "c.bin").write_text("needle in a file of another suffix\n")
    (tmp_path / "main.py").write_text("print('no match')\n")
    monkeypatch.setenv("FILE_SEARCH_ROOT", str(tmp_path))
    return tmp_path


async def test_matches_are_structured_with_progress_per_file() -> None:
    async with (
        open_client(server) as client,
        client.stream(
            "tools/call",
            {"name": "search", "arguments": {"needle": "needle"}},
            meta={"progressToken": "p"},
        ) as stream,
    ):
        messages = [await stream.next() for _ in range(4)]
    progress = [m["params"] for m in messages[:3]]
    assert progress == [
        {"progressToken": "p", "progress": 1, "total": 3, "message": "docs/a.md"},
        {"progressToken": "p", "progress": 2, "total": 3, "message": "docs/b.txt"},
        {"progressToken": "p", "progress": 3, "total": 3, "message": "main.py"},
    ]
    result = messages[3]["result"]
    assert result["structuredContent"] == {
        "result": [
            {"path": "docs/a.md", "line": 2, "text": "the needle here"},
            {"path": "docs/b.txt", "line": 1, "text": "needle one"},
            {"path": "docs/b.txt", "line": 2, "text": "needle two"},
        ]
    }


async def test_typed_arguments_arrive_converted_and_bounded() -> None:
    async with open_client(server) as client:
        one = await client.call_tool(
            "search",
            {"needle": "needle", "directory": "docs", "suffixes": [".txt"], "max_results": "1"},
        )
        assert one["structuredContent"] == {
            "result": [{"path": "docs/b.txt", "line": 1, "text": "needle one"}]
        }
        too_many = await client.call_tool("search", {"needle": "x", "max_results": 1000})
        assert too_many["isError"] is True
        assert too_many["content"][0]["text"] == (
            "Invalid arguments: max_results: Input should be less than or equal to 200"
        )
        empty = await client.call_tool("search", {"needle": ""})
        assert empty["isError"] is True
        tools = {tool["name"]: tool for tool in await client.list_tools()}
    schema = tools["search"]["inputSchema"]["properties"]
    assert schema["max_results"]["maximum"] == 200
    assert schema["suffixes"]["uniqueItems"] is True
    assert tools["count_lines"]["outputSchema"]["properties"]["result"]["type"] == "integer"


async def test_the_sync_tool_runs_and_nothing_leaves_the_root() -> None:
    async with open_client(server) as client:
        counted = await client.call_tool("count_lines", {"path": "docs/a.md"})
        assert counted["structuredContent"] == {"result": 3}
        outside = await client.call_tool("count_lines", {"path": "../../etc/passwd"})
        assert outside["isError"] is True
        assert outside["content"] == [
            {"type": "text", "text": "../../etc/passwd is outside the search root"}
        ]
        escape = await client.call_tool("search", {"needle": "root", "directory": "/etc"})
        assert escape["content"] == [{"type": "text", "text": "/etc is outside the search root"}]
