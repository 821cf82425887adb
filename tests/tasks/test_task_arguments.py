"""A task's arguments are checked and converted once, when it is created (issue 40): the
inputSchema validator and the handler's conversion run for its creation, and its run reuses
what they made. And a result the runner measured is not written again by the store to count
its bytes.

The counts are taken through a real ``tools/call``: the tool's validator is wrapped in one
that counts its calls, and its parameter's type counts its conversions (a pydantic
validator), so a second check anywhere between the request and the tool shows.
"""

# No ``from __future__ import annotations``: the tools' hints name a local function.

from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator
from support.task_service import WITH_TASKS, tasks_of
from support.task_world import create, settle

from presa_trio import Server
from presa_trio._kernel.registry import BoundArguments
from presa_trio.ext.tasks import TasksExtension, _store
from presa_trio.extensions import to_json
from presa_trio.testing import Client, open_client


class Counts:
    def __init__(self) -> None:
        self.schema = 0  # inputSchema validations (is_valid and iter_errors)
        self.converted = 0  # conversions of the argument to its hint


class CountingValidator:
    """A tool's argument validator that counts how often it is asked."""

    def __init__(self, inner: Any, counts: Counts) -> None:
        self._inner = inner
        self._counts = counts

    def is_valid(self, instance: Any) -> bool:
        self._counts.schema += 1
        return bool(self._inner.is_valid(instance))

    def iter_errors(self, instance: Any) -> Any:
        self._counts.schema += 1
        return self._inner.iter_errors(instance)


def counted_server(counts: Counts, **options: Any) -> Server:
    server = Server("arguments", "1")
    server.add_extension(TasksExtension(**options))

    def count(value: int) -> int:
        counts.converted += 1
        return value

    @server.tool(options={"tasks": "optional"})
    async def double(n: Annotated[int, AfterValidator(count)]) -> str:
        """Doubles n."""
        return str(2 * n)

    @server.tool()
    async def plain(n: Annotated[int, AfterValidator(count)]) -> str:
        """Doubles n, never as a task."""
        return str(2 * n)

    for tool in server.registry.tools.values():
        tool.validator = CountingValidator(tool.validator, counts)
    return server


@pytest.fixture
def counts() -> Counts:
    return Counts()


@pytest.fixture
async def client(counts: Counts) -> AsyncIterator[Client]:
    async with open_client(counted_server(counts), capabilities=WITH_TASKS) as client:
        yield client


async def test_a_task_checks_and_converts_its_arguments_once(
    client: Client, counts: Counts
) -> None:
    task_id = await create(client, "double", {"n": 21})
    assert (counts.schema, counts.converted) == (1, 1)  # at its creation
    done = await settle(client, task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "42"}]
    assert (counts.schema, counts.converted) == (1, 1)  # its run checked nothing again


async def test_lax_arguments_are_converted_once_too(client: Client, counts: Counts) -> None:
    """``"21"`` fails the derived inputSchema, is converted in lax mode, and the converted
    value is checked against the schema again: two schema checks, one conversion, all at
    creation."""
    task_id = await create(client, "double", {"n": "21"})
    assert (counts.schema, counts.converted) == (2, 1)
    done = await settle(client, task_id)
    assert done["result"]["content"] == [{"type": "text", "text": "42"}]
    assert (counts.schema, counts.converted) == (2, 1)


async def test_bad_arguments_are_answered_at_creation_as_before(
    client: Client, counts: Counts
) -> None:
    result = await client.call_tool("double", {"n": "many"})
    assert result["resultType"] == "complete" and result["isError"] is True
    assert result["content"][0]["text"].startswith("Invalid arguments: ")
    assert await tasks_of(client).store.count() == 0
    plain = await client.call_tool("plain", {"n": "many"})  # the same answer as a plain call
    assert plain["content"] == result["content"]


async def test_a_plain_call_binds_once(client: Client, counts: Counts) -> None:
    result = await client.call_tool("plain", {"n": 4})
    assert result["content"] == [{"type": "text", "text": "8"}]
    assert (counts.schema, counts.converted) == (1, 1)
    client.capabilities = {}  # no Tasks declared: an optional tool runs directly
    result = await client.call_tool("double", {"n": 4})
    assert result["content"] == [{"type": "text", "text": "8"}]
    assert (counts.schema, counts.converted) == (2, 2)


async def test_an_optional_tool_whose_input_is_too_large_runs_on_what_was_bound(
    counts: Counts,
) -> None:
    server = counted_server(counts, max_input_bytes=4)
    async with open_client(server, capabilities=WITH_TASKS) as client:
        result = await client.call_tool("double", {"n": 21})  # {"n":21} is 8 bytes
        assert result["resultType"] == "complete"
        assert result["content"] == [{"type": "text", "text": "42"}]
        assert (counts.schema, counts.converted) == (1, 1)
        assert await tasks_of(client).store.count() == 0


def test_bound_arguments_are_taken_once_and_by_their_own_tool(counts: Counts) -> None:
    server = counted_server(counts)
    double, plain = server.registry.tools["double"], server.registry.tools["plain"]
    bound = double.bound({"n": 3})
    assert isinstance(bound, BoundArguments) and bound == {"n": 3}
    assert (counts.schema, counts.converted) == (1, 1)
    assert plain.bound({"n": "three"}) == ["n: Input should be a valid integer, unable to "
                                           "parse string as an integer"]  # fmt: skip
    counts.schema = counts.converted = 0
    assert bound.take(plain) == {"n": 3} and counts.converted == 1  # not its tool: bound anew
    first = bound.take(double)
    assert first == {"n": 3} and counts.converted == 1  # what was bound, as it was
    first["ctx"] = "added by the handler's call"
    assert bound.take(double) == {"n": 3} and counts.converted == 2  # taken: bound again


async def test_the_memory_store_counts_a_result_without_writing_it_again(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's check of a result measured it: the store takes that size."""
    written: list[Mapping[str, Any]] = []

    def counting(value: Any, *args: Any) -> bytes:
        written.append(value)
        return to_json(value, *args)

    monkeypatch.setattr(_store, "to_json", counting)
    store = tasks_of(client).store
    task_id = await create(client, "double", {"n": 21})
    done = await settle(client, task_id)
    assert done["status"] == "completed"
    assert written == []  # no payload was written to be measured
    record = await store.get(task_id)
    assert record is not None and record.result_bytes == len(to_json(record.result))
    assert store.stored_bytes == len(to_json(record.result)) > 0
    assert _store.payload_bytes(record) == store.stored_bytes
