"""Servers presa_trio did not write, for ``presa_trio.testing``'s client of any server: the
official SDK's (``mcp`` 2.x, the test venv's: tests/support/sdk_server.py), FastMCP (the test
venv's: tests/support/fastmcp_server.py) and the published ``mcp`` 1.30 FastMCP (its cached
virtualenv: tests/support/mcp1_server.py), each over stdio (a command) and over Streamable
HTTP under uvicorn on 127.0.0.1 (a URL)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import client_installs
from support.servers import SUPPORT, Served, free_port, wait_listening

SCRIPTS = {
    "sdk": SUPPORT / "sdk_server.py",
    "fastmcp": SUPPORT / "fastmcp_server.py",
    "mcp1": SUPPORT / "mcp1_server.py",
}


def interpreter(which: str) -> str:
    return str(client_installs.mcp1_python()) if which == "mcp1" else sys.executable


def serve_script(which: str, log_path: Path) -> Iterator[str]:
    """The URL of ``which`` served over HTTP until the generator is closed."""
    port = free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [interpreter(which), str(SCRIPTS[which]), "http", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    served = Served(port, process, log_path)
    try:
        wait_listening(served, f"the {which} server", seconds=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        try:
            served.stop()
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def sdk_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_script("sdk", tmp_path_factory.mktemp("sdk") / "server.log")


@pytest.fixture(scope="session")
def fastmcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_script("fastmcp", tmp_path_factory.mktemp("fastmcp") / "server.log")


@pytest.fixture(scope="session")
def mcp1_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_script("mcp1", tmp_path_factory.mktemp("mcp1") / "server.log")


@pytest.fixture
def target(request: pytest.FixtureRequest) -> tuple[str, str | list[str]]:
    """``(which, how)``: the server and how to reach it, a URL or a command; parametrized
    indirectly with ``"sdk-stdio"``, ``"mcp1-http"`` and the like."""
    which, transport = str(request.param).split("-")
    if transport == "http":
        return which, str(request.getfixturevalue(f"{which}_url"))
    return which, [interpreter(which), str(SCRIPTS[which]), "stdio"]
