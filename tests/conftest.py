"""Shared fixtures: the conformance fixture server and an in-process client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from postgres_cluster import Cluster, running_cluster

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
    """One throwaway PostgreSQL cluster for the whole run (see tests/postgres_cluster.py)."""
    with running_cluster() as cluster:
        yield cluster
