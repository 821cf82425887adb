"""The left column of docs/porting.md is what the official SDK (``mcp`` 2.3) and FastMCP 4.1
really do: ``porting_sources.py`` serves each idiom with that library and calls it with that
library's client (in its own interpreter: asyncio), and every row of the table must be one it
checks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "porting_sources.py"

# Each row's left cell, and the key of what porting_sources.py saw for it (None: the row
# names no API of the SDK's).
ROWS = {
    '`mcp = MCPServer("notes")`': "streamable_http_app",
    "`@mcp.tool()`": "rate",
    "`ctx: Context` parameter": "rate",
    'typed parameters (models, `Field(...)`, `"5"` for an `int`)': "rate",
    "`await ctx.report_progress(p, total)`": "progress",
    '`await ctx.elicit(message, schema)` (needs a session: a client with `mode="legacy"`)': "ask",
    "`await ctx.session.create_message(...)` (sampling; the same)": "sample",
    "lifespan yielding a context, read as `ctx.request_context.lifespan_context`": "read_note",
    "a sync `def` tool (runs in a worker thread)": "threaded",
    "`mcp.streamable_http_app()`": "streamable_http_app",
    "`mcp.run()` (stdio)": "run",
    "mounting in Starlette": None,
    "tasks (fastmcp-tasks)": None,
    "the in-memory client for tests, `Client(mcp)`": "rate",
}


def table_rows() -> list[str]:
    text = (ROOT / "docs" / "porting.md").read_text()
    table = text[text.index("| The official SDK | presa_trio |") :].split("\n\n")[0]
    return [line.split(" | ")[0].removeprefix("| ") for line in table.splitlines()[2:]]


def test_every_row_of_the_table_is_checked() -> None:
    assert table_rows() == list(ROWS)


def test_the_sdk_and_fastmcp_do_what_the_left_column_says() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    sdk, fastmcp = seen["sdk"], seen["fastmcp"]
    for key in filter(None, ROWS.values()):
        assert key in sdk
    # typed parameters converted laxly ("2" and "3" for ints), a model back, structured
    assert sdk["rate"] == fastmcp["rate"] == {"title": "tea", "stars": 6}
    assert sdk["rate_output_properties"] == ["stars", "title"]  # a model is not wrapped
    assert sdk["progress"] == fastmcp["progress"] == [[1, 2]]
    assert (sdk["ask"], sdk["sample"]) == ("accept True", "sampled")
    assert sdk["read_note"] == fastmcp["read_note"] == sdk["run"] == "buy milk"
    assert sdk["threaded"] is fastmcp["threaded"] is True
    assert sdk["streamable_http_app"] == "Starlette"
    assert fastmcp["http_app"] is True
    assert sdk["fastmcp_module"] is True  # mcp.server.fastmcp: "renamed to MCPServer"
    # "the SDK wraps [a str return] as {"result": ...}"
    assert sdk["plain"] == {"result": "text"}
    assert sdk["plain_output_schema"]["properties"] == {
        "result": {"title": "Result", "type": "string"}
    }
    assert sdk["auth"] == {"required_scopes": ["read"], "verified": "cli", "server": "MCPServer"}
    text = (ROOT / "docs" / "porting.md").read_text()
    assert re.search(r"FastMCP 4\.1 \(`from fastmcp import FastMCP, Context`\)", text)
