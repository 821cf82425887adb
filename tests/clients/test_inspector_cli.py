"""The published MCP Inspector's CLI (``@modelcontextprotocol/inspector --cli``) in its default
era against presa_trio: for an ad-hoc target that is the initialize handshake (its
``--protocol-era`` defaults to ``legacy``), over streamable HTTP and over stdio. Its output is
the result as JSON on stdout; ``era`` tells how the server served the call."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.published_clients import LEGACY, PRESA_TRIO, SERVER, TOOLS, run, stdio_target, text
from support.servers import ROOT

pytestmark = pytest.mark.e2e

LAUNCHER = Path("clients", "launcher", "build", "index.js")
WHOAMI = {
    "name": "whoami",
    "description": "The process that ran this call.",
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
    "outputSchema": {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "additionalProperties": False,
        "x-fastmcp-wrap-result": True,
    },
}
ERA_TEXT = f"{LEGACY}, a session, client inspector-cli"
ERA = {"content": [text(ERA_TEXT)], "structuredContent": {"result": ERA_TEXT}}


@pytest.fixture
def cli(node: Path, inspector: Path, tmp_path: Path) -> Any:
    """Run the Inspector's CLI with ``args``; its stdout as JSON. Its home is a temporary
    folder: it keeps a catalog and secrets under ``~/.mcp-inspector``."""

    def inspect(*args: str) -> Any:
        out = run([str(node), str(inspector / LAUNCHER), "--cli", *args], {"HOME": str(tmp_path)})
        return json.loads(out)

    return inspect


def over_http(port: int) -> list[str]:
    return [f"http://127.0.0.1:{port}/mcp", "--transport", "http"]


def over_stdio() -> list[str]:
    """``presa-trio serve clients_app:server --stdio`` as the Inspector's target."""
    env = stdio_target()["env"]
    return [str(PRESA_TRIO), "serve", SERVER, "--stdio", "-e",
            f"PYTHONPATH={env['PYTHONPATH']}", "--cwd", str(ROOT)]  # fmt: skip


def check_tools(listed: dict[str, Any]) -> None:
    """A tools/list result as the older era writes it: the tools alone, each with only the
    keys a 2025-11-25 ``Tool`` has here."""
    assert list(listed) == ["tools"]
    assert [tool["name"] for tool in listed["tools"]] == TOOLS
    for tool in listed["tools"]:
        assert set(tool) <= {"name", "description", "inputSchema", "outputSchema"}, tool
    [whoami] = [tool for tool in listed["tools"] if tool["name"] == "whoami"]
    assert whoami == WHOAMI


def test_inspector_cli_lists_tools_over_http(cli: Any, clients_port: int) -> None:
    check_tools(cli(*over_http(clients_port), "--method", "tools/list"))


def test_inspector_cli_calls_a_tool_over_http(cli: Any, clients_port: int) -> None:
    called = cli(*over_http(clients_port), "--method", "tools/call", "--tool-name", "whoami")
    pid = called["structuredContent"]["result"]
    assert called == {"content": [text(str(pid))], "structuredContent": {"result": pid}}
    assert isinstance(pid, int) and pid != os.getpid()
    era = cli(*over_http(clients_port), "--method", "tools/call", "--tool-name", "era")
    assert era == ERA


def test_inspector_cli_over_stdio(cli: Any) -> None:
    check_tools(cli(*over_stdio(), "--method", "tools/list"))
    assert cli(*over_stdio(), "--method", "tools/call", "--tool-name", "era") == ERA
