"""The tasks server of tests/support/task_world.py as fixtures: its world, its clock, and an
in-process client on it (``env``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from support.task_service import WITH_TASKS
from support.task_world import FakeClock, World, build

from presa_trio.ext.tasks import TasksExtension
from presa_trio.testing import Client, open_client


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def env(world: World, clock: FakeClock) -> AsyncIterator[tuple[Client, TasksExtension]]:
    server, ext = build(world, clock)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        yield client, ext
