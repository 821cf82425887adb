"""Fixtures of the published-client tests: the clients app under hypercorn, and the clients,
installed into their cache on first use (tests/support/client_installs.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import client_installs
from support.servers import SUPPORT, serve


@pytest.fixture(scope="session")
def clients_port() -> Iterator[int]:
    """The port of tests/support/clients_app.py under hypercorn, for the whole run."""
    yield from serve("clients_app:app", SUPPORT)


@pytest.fixture(scope="session")
def mcp1_python() -> Path:
    """The interpreter of the cached virtualenv holding ``mcp`` 1.x."""
    return client_installs.mcp1_python()


@pytest.fixture(scope="session")
def node() -> Path:
    """A Node.js >= 22."""
    return client_installs.node()


@pytest.fixture(scope="session")
def ts_sdk(node: Path) -> Path:
    """The folder of the cached ``@modelcontextprotocol/sdk`` 1.x."""
    return client_installs.npm_package(
        client_installs.TS_SDK_PACKAGE, client_installs.TS_SDK_VERSION
    )


@pytest.fixture(scope="session")
def inspector(node: Path) -> Path:
    """The folder of the cached ``@modelcontextprotocol/inspector``."""
    return client_installs.npm_package(
        client_installs.INSPECTOR_PACKAGE, client_installs.INSPECTOR_VERSION
    )
