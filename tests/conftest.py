"""Shared fixtures: the conformance fixture server and an in-process client for it, a throwaway
PostgreSQL cluster, and real servers under hypercorn (tests/support/servers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from support.postgres_cluster import Cluster, running_cluster
from support.servers import SUPPORT, serve

from fixtures.conformance import build_server
from presa_trio import Server
from presa_trio.testing import Client, open_client


@pytest.fixture
def fixture_server() -> Server:
    return build_server()


@pytest.fixture
async def client(fixture_server: Server) -> AsyncIterator[Client]:
    async with open_client(fixture_server) as c:
        yield c


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    """One throwaway PostgreSQL cluster for the whole run (tests/support/postgres_cluster.py)."""
    with running_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def e2e_port() -> Iterator[int]:
    """The port of tests/support/e2e_app.py under hypercorn, for the whole run."""
    yield from serve("e2e_app:app", SUPPORT)


@pytest.fixture(scope="session")
def fixture_port() -> Iterator[int]:
    """The port of the conformance fixture under hypercorn, for the whole run."""
    yield from serve("fixtures.conformance:app")
