"""Fault injection: a failing or stalling task store, a tool that blocks the event loop, a tool
that breaks its output schema, a client that never reads.

Each fault is contained (it fails the one request it touches, answered as specified), logged
once, and the server keeps serving everyone else.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
import trio
import trio.testing
from asgi_scope import http_scope

from presa_trio import AsgiApp, Context, Server, Timeouts, Validation
from presa_trio.ext.tasks import (
    EXTENSION_ID,
    MemoryTaskStore,
    TaskLimits,
    TaskRecord,
    TasksExtension,
)
from presa_trio.testing import Client, open_client

WITH_TASKS: dict[str, Any] = {"elicitation": {}, "extensions": {EXTENSION_ID: {}}}
INTERNAL = {"code": -32603, "message": "Internal error"}
SECRET_PATH = "/var/lib/presa/tasks.db"


class WallClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def tasks_of(client: Client) -> Any:
    runtime = client.app.runtime
    assert runtime is not None
    return runtime.service(EXTENSION_ID)


class FaultyStore:
    """A ``MemoryTaskStore`` whose operations named in ``failing`` raise an ``OSError`` naming
    a file, and whose ``get`` stalls while ``stalled`` (until cancelled)."""

    def __init__(self) -> None:
        self.inner = MemoryTaskStore()
        self.failing: set[str] = set()
        self.stalled = False
        self.stall_entered = trio.Event()
        self.stalls_abandoned = 0

    async def _enter(self, operation: str) -> None:
        await trio.lowlevel.checkpoint()
        if operation in self.failing:
            raise OSError(5, "Input/output error", SECRET_PATH)

    async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
        await self._enter("create")
        await self.inner.create(task, limits)

    async def get(self, task_id: str) -> TaskRecord | None:
        await self._enter("get")
        if self.stalled:
            self.stall_entered.set()
            try:
                await trio.sleep_forever()
            finally:
                self.stalls_abandoned += 1
        return await self.inner.get(task_id)

    async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
        await self._enter("compare_and_set")
        return await self.inner.compare_and_set(task, expected_revision)

    async def delete_expired(self, now_ms: int) -> int:
        await self._enter("delete_expired")
        return await self.inner.delete_expired(now_ms)

    async def count(self) -> int:
        await self._enter("count")
        return await self.inner.count()


def store_server(store: FaultyStore, clock: WallClock) -> Server:
    server = Server("faults", "1", validation=Validation(outbound=True))
    server.add_extension(
        TasksExtension(store=store, clock=clock, ttl_ms=3_600_000, reap_interval=60)
    )

    @server.tool(options={"tasks": "optional"})
    async def sleepy() -> str:
        """Sleeps until cancelled."""
        await trio.sleep_forever()
        return "never"

    @server.tool(options={"tasks": "optional"})
    async def quick() -> str:
        """Answers at once."""
        await trio.lowlevel.checkpoint()
        return "quick"

    @server.tool(thread=False)  # on the loop: a worker thread would let MockClock jump
    def plain() -> str:
        """Never a task."""
        return "plain"

    return server


async def assert_still_serving(client: Client) -> None:
    """Requests that do not touch the task store are answered as usual."""
    assert (await client.discover())["resultType"] == "complete"
    assert {t["name"] for t in await client.list_tools()} == {"sleepy", "quick", "plain"}
    plain = await client.call_tool("plain")
    assert plain["content"] == [{"type": "text", "text": "plain"}]
    sync = await client.call_tool("quick", capabilities={})  # undeclared: runs synchronously
    assert sync["content"] == [{"type": "text", "text": "quick"}]


# ---------------------------------------------------------------------- 12. the task store

AFFECTED = {
    "create": ("tools/call", "handling tools/call failed"),
    "get": ("tasks/get", "handling tasks/get failed"),
    "compare_and_set": ("tasks/cancel", "handling tasks/cancel failed"),
    "delete_expired": (None, "the task reaper failed"),
}


@pytest.mark.parametrize("operation", list(AFFECTED))
async def test_a_failing_store_operation_fails_only_the_request_it_serves(
    operation: str, mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    mock_clock.autojump_threshold = 0
    caplog.set_level(logging.WARNING)
    store, clock = FaultyStore(), WallClock()
    async with open_client(store_server(store, clock), capabilities=WITH_TASKS) as client:
        runner = tasks_of(client).runner
        standing = await client.create_task("sleepy")
        await trio.testing.wait_all_tasks_blocked()
        stored = await store.inner.count()
        method, logged = AFFECTED[operation]

        store.failing.add(operation)
        if method is None:  # only the reaper deletes: one pass fails, no request does
            await trio.sleep(61)
        else:
            params = {"name": "quick"} if method == "tools/call" else {"taskId": standing}
            failed = await client.send(client.message(method, params))
            assert failed.status == 500
            assert failed.response is not None and failed.response["error"] == INTERNAL
            for leak in (SECRET_PATH.encode(), b"Errno", b"Traceback", b"OSError"):
                assert leak not in failed.body
        await assert_still_serving(client)
        if operation == "compare_and_set":
            await check_a_refused_cancel(client, store, runner, standing, caplog)
            return
        assert [r.getMessage() for r in caplog.records] == [logged]
        (record,) = caplog.records
        assert record.levelno == logging.ERROR and record.exc_info is not None
        assert SECRET_PATH in (record.exc_text or "")  # the detail goes to the log only
        # Nothing was half done: no new record, the standing task still runs.
        assert await store.inner.count() == stored
        standing_record = await store.inner.get(standing)
        assert standing_record is not None and standing_record.status == "working"
        assert runner.live_count == 1

        store.failing.clear()  # the store recovers
        task_id = await client.create_task("quick")
        with trio.fail_after(5):
            done = await client.wait_task(task_id)
        assert done["result"]["content"] == [{"type": "text", "text": "quick"}]
        assert (await client.get_task(standing))["status"] == "working"
        await client.cancel_task(standing)
        assert (await client.get_task(standing))["status"] == "cancelled"
        clock.now += 86_400  # every TTL (and any grace) has run out: the next pass deletes all
        await trio.sleep(61)  # past the reaper's next pass, whatever the phase
        assert await store.inner.count() == 0
        assert [r.getMessage() for r in caplog.records] == [logged]


async def check_a_refused_cancel(
    client: Client, store: FaultyStore, runner: Any, standing: str, caplog: Any
) -> None:
    """``tasks/cancel`` while the store refuses every write: the cancel still reaches the
    task (its work stops at once), the request answers -32603, and the outcome the store
    refused is recorded by itself once the store recovers."""
    prefix = f"recording the outcome of task {standing} failed"
    assert [r.getMessage() for r in caplog.records] == [
        f"{prefix} once; retrying",
        f"{prefix} once; retrying",
        f"{prefix} once; retrying",
        prefix,
        "handling tasks/cancel failed",
    ]
    assert runner.live_count == 0  # the work stopped
    assert runner.unsettled_count == 1
    stale = await store.inner.get(standing)
    assert stale is not None and stale.status == "working"  # the store took nothing
    store.failing.clear()  # the store recovers...
    await trio.sleep(6)  # ...and the runner's next offer is taken
    assert (await client.get_task(standing))["status"] == "cancelled"
    assert runner.unsettled_count == 0


async def test_a_stalled_store_is_bounded_by_the_clients_disconnect() -> None:
    """``tasks/get`` against a store that never answers: the client's disconnect ends it,
    and everything else is served meanwhile."""
    store, clock = FaultyStore(), WallClock()
    async with open_client(store_server(store, clock), capabilities=WITH_TASKS) as client:
        task_id = await client.create_task("quick")
        with trio.fail_after(5):
            await client.wait_task(task_id)
        store.stalled = True
        with trio.fail_after(5):
            async with client.stream("tasks/get", {"taskId": task_id}) as stream:
                await store.stall_entered.wait()
                await assert_still_serving(client)
                assert stream.status == 0  # no answer has started
                stream.disconnect()
        assert store.stalls_abandoned == 1 and stream.status == 0
        store.stalled = False
        assert (await client.get_task(task_id))["status"] == "completed"


# ---------------------------------------------------------------------- 13. a blocked loop


@pytest.mark.parametrize("phase", [0.0, 0.1], ids=["at-the-watchers-wakeup", "mid-period"])
async def test_a_tool_blocking_the_event_loop_is_reported_once(
    phase: float, caplog: pytest.LogCaptureFixture
) -> None:
    """An ``async`` tool calling ``time.sleep(0.3)`` with ``loop_warning=0.1``: the other
    requests complete after it, and "the event loop was blocked" is logged exactly once,
    wherever the block falls in the watcher's period (real clock)."""
    caplog.set_level(logging.WARNING, logger="presa_trio")
    server = Server("blocking", "1", loop_warning=0.1)
    entered = trio.Event()
    unblocked: list[bool] = []

    @server.tool()
    async def blocker() -> str:
        """Blocks the event loop."""
        entered.set()
        time.sleep(0.3)  # noqa: ASYNC251 - the fault under test
        unblocked.append(True)
        return "blocked"

    async with open_client(server) as client:
        await trio.testing.wait_all_tasks_blocked()  # the watcher has started a period
        await trio.sleep(phase)
        answers: list[str] = []

        async def other() -> None:
            await entered.wait()
            result = await client.discover()
            assert unblocked == [True]  # it was served after the block, not lost
            answers.append(result["resultType"])

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(other)
                blocked = await client.call_tool("blocker")
            await trio.sleep(0.6)  # a few quiet periods: no second report
        assert blocked["content"] == [{"type": "text", "text": "blocked"}]
        assert answers == ["complete"]
    reports = [r for r in caplog.records if "the event loop was blocked" in r.getMessage()]
    assert len(reports) == 1, [r.getMessage() for r in caplog.records]


# ---------------------------------------------------------------------- 14. a broken output


OUTPUT = {
    "type": "object",
    "properties": {"count": {"type": "integer"}},
    "required": ["count"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("wrong", "where"),
    [({"count": "many"}, "count"), ({}, "(root)"), ("oops", "(root)"), ([1], "(root)")],
)
async def test_output_that_breaks_the_schema_is_a_tool_error(
    wrong: Any, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    server = Server("shapes", "1", validation=Validation(outbound=True))
    server.add_extension(TasksExtension())

    @server.tool(output_schema=OUTPUT, options={"tasks": "optional"})
    async def miscount(ctx: Context) -> Any:
        """Returns the wrong shape."""
        await trio.lowlevel.checkpoint()
        return wrong

    @server.tool(output_schema=OUTPUT)
    async def counts() -> dict[str, int]:
        """Returns the right shape."""
        await trio.lowlevel.checkpoint()
        return {"count": 3}

    expected = {
        "resultType": "complete",
        "content": [
            {
                "type": "text",
                "text": "Tool miscount returned output that does not match its outputSchema",
            }
        ],
        "isError": True,
    }
    async with open_client(server, capabilities=WITH_TASKS) as client:
        result = await client.send(
            client.message("tools/call", {"name": "miscount"}, capabilities={})
        )
        assert result.status == 200 and result.response is not None
        assert result.response["result"] == {
            **expected,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "shapes", "version": "1"}},
        }
        assert b"many" not in result.body and b"oops" not in result.body
        (record,) = caplog.records
        assert record.levelno == logging.ERROR and record.exc_info is None
        assert record.getMessage().startswith(f"tool miscount broke its outputSchema at {where}:")

        good = await client.call_tool("counts")
        assert good["structuredContent"] == {"count": 3} and "isError" not in good

        task_id = await client.create_task("miscount")
        with trio.fail_after(5):
            task = await client.wait_task(task_id)
        assert task["status"] == "completed" and task["result"] == expected
        assert len(caplog.records) == 2  # once more, for the task's own call


# ------------------------------------------------------------- 15. a client that never reads


async def never_reading(
    app: AsgiApp,
    client: Client,
    method: str,
    params: dict[str, Any],
    stop_at: str,
    meta: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One raw ASGI exchange whose ``send`` never returns for the message type ``stop_at``;
    the client neither reads on nor disconnects. Returns what the server tried to send."""
    message = client.message(method, params, meta=meta)
    headers = [(k.encode(), v.encode()) for k, v in client.headers_for(message)]
    scope = http_scope([*headers, (b"host", b"localhost:8000")])
    pending = [json.dumps(message).encode()]
    attempted: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            await trio.lowlevel.checkpoint()
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        await trio.sleep_forever()  # never a disconnect
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(sent: dict[str, Any]) -> None:
        attempted.append(dict(sent))
        if sent["type"] == stop_at:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()

    await app(scope, receive, send)
    return attempted


def slow_reader_server(cleaned: list[str]) -> Server:
    server = Server("readers", "1")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Streams progress for a long while."""
        try:
            for step in range(1, 1_000):
                await ctx.progress(step)
                await trio.sleep(1)
        finally:
            cleaned.append("chatty")
        return "done"

    @server.tool(thread=False)  # on the loop: a worker thread would let MockClock jump
    def plain() -> str:
        """Answers at once."""
        return "plain"

    return server


@pytest.mark.parametrize(
    ("tool", "stop_at", "meta"),
    [
        ("plain", "http.response.body", None),
        ("plain", "http.response.start", None),
        ("chatty", "http.response.body", {"progressToken": "p"}),
    ],
    ids=["json-body", "json-start", "sse-stream"],
)
async def test_a_client_that_never_reads_is_dropped_within_the_write_timeout(
    tool: str,
    stop_at: str,
    meta: dict[str, Any] | None,
    mock_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    mock_clock.autojump_threshold = 0
    caplog.set_level(logging.INFO, logger="presa_trio.http")
    cleaned: list[str] = []
    app = slow_reader_server(cleaned).asgi_app(timeouts=Timeouts(write=2.0))
    async with open_client(app) as client:
        params: dict[str, Any] = {"name": tool}
        dropped: list[float] = []
        attempted: list[dict[str, Any]] = []

        async def stuck() -> None:
            start = trio.current_time()
            attempted.extend(await never_reading(app, client, "tools/call", params, stop_at, meta))
            dropped.append(trio.current_time() - start)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stuck)
            await trio.testing.wait_all_tasks_blocked()
            # Others are served while the stuck exchange waits on its reader.
            assert (await client.call_tool("plain"))["content"][0]["text"] == "plain"
            assert dropped == []
        # Within the write deadline: never before it, at most two of its keeper's looks
        # after it (a look every tenth of the shorter timeout: 0.2 s here).
        (after,) = dropped
        assert 2.0 - 1e-9 <= after <= 2.0 + 2 * 0.2 + 1e-9
        assert attempted[-1]["type"] == stop_at  # nothing was written after the stuck write
        if tool == "chatty":
            assert cleaned == ["chatty"]  # the handler was cancelled, its cleanup ran
        drops = [r for r in caplog.records if "stopped reading" in r.getMessage()]
        assert len(drops) == 1
        assert (await client.call_tool("plain"))["content"][0]["text"] == "plain"


async def test_the_drop_is_logged_with_the_write_timeout(
    mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The log line of a dropped reader names how long it was waited for (the write
    timeout), whatever the clock reads."""
    mock_clock.autojump_threshold = 0
    caplog.set_level(logging.INFO, logger="presa_trio.http")
    app = slow_reader_server([]).asgi_app(timeouts=Timeouts(write=2.0))
    async with open_client(app) as client:
        await trio.sleep(100)  # the run has been up for a while
        await never_reading(app, client, "tools/call", {"name": "plain"}, "http.response.body")
    assert [r.getMessage() for r in caplog.records] == [
        "a client stopped reading for 2.0 s; its request is dropped"
    ]
