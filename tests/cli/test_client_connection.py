"""The client connection under the commands (presa_trio/_client), driven directly: which
era it settles on with each kind of server, and a spawned server stopped within its bound
however it behaves."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import pytest
import trio
from support import cli_client_app, client_installs
from support.servers import ROOT, SUPPORT

from presa_trio._client.connection import Connection
from presa_trio._client.transports import STOP_GRACE, open_in_process, open_spawned
from presa_trio._client.wire import Era

pytestmark = pytest.mark.e2e


class Named:
    """Answers every question with a name."""

    async def answer(self, key: str, request: Mapping[str, Any]) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return {"action": "accept", "content": {"name": "Ada"}}


def ignore(line: str) -> None:
    pass


async def test_a_presa_server_in_process_is_spoken_to_in_2026_07_28() -> None:
    with trio.fail_after(30):
        async with open_in_process(cli_client_app.server) as transport:
            connection = await Connection.open(transport, Named(), ignore)
            assert connection.era is Era.MODERN
            assert "2026-07-28" in connection.server["supportedVersions"]
            result = await connection.with_rounds("tools/call", {"name": "ask", "arguments": {}})
            assert result["content"][0]["text"] == "Hello, Ada"


async def test_a_spawned_presa_server_is_spoken_to_in_2026_07_28() -> None:
    command = [sys.executable, "-m", "presa_trio", "serve", "examples.weather:server", "--stdio"]
    with trio.fail_after(60):
        async with open_spawned(command, cwd=ROOT) as transport:
            connection = await Connection.open(transport, Named(), ignore)
            assert connection.era is Era.MODERN
            assert connection.session_id is None


async def test_a_spawned_mcp1_server_gets_an_initialize_session() -> None:
    python = client_installs.mcp1_python()
    command = [str(python), str(SUPPORT / "mcp1_server.py"), "stdio"]
    with trio.fail_after(60):
        async with open_spawned(command) as transport:
            connection = await Connection.open(transport, Named(), ignore)
            assert (connection.era, connection.legacy_version) == (Era.LEGACY, "2025-11-25")
            assert connection.server["serverInfo"]["name"] == "mcp1-server"
            result = await connection.with_rounds("tools/call", {"name": "ask", "arguments": {}})
            assert result["content"][0]["text"] == "Hello, Ada"


async def test_a_spawned_server_that_ignores_end_of_input_is_killed_after_its_grace() -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    with trio.fail_after(STOP_GRACE + 30):
        async with open_spawned([sys.executable, "-c", stubborn]) as transport:
            process = transport.process
    assert process.returncode == -9  # SIGKILL: it did not leave at end of input
