"""The shared backend's background loops behind their error boundary: an ``OSError`` in a
look for signals or in a heartbeat is logged (with its traceback, once per episode) and
retried with backoff; the run keeps serving, ``Runtime.backend_health()`` says which loop
fails until it works again, and a signal sent after it recovers is delivered. On its own, a
loop's ``Retry`` doubles its delay up to a bound and lets what is not an error through.

Real threads do the databases' work, so the clock is the real one (trio's ``MockClock``
would jump past a thread's work), except for a loop that fails before any thread runs; every
wait is bounded by ten seconds or more for what takes milliseconds."""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio
import trio.lowlevel
import trio.testing
from support.postgres_cluster import Cluster

from presa_trio import Context, Server
from presa_trio._backends.sql import MAX_BACKOFF, Retry
from presa_trio._backends.sqlite import SqliteDatabase
from presa_trio.backends import BackendHealth, SharedBackend, StorageUnavailable
from presa_trio.ext.tasks import TasksExtension
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, open_client

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
QUESTION = elicit("Go?", {"go": {"type": "boolean"}}, ["go"])
YES = {"action": "accept", "content": {"go": True}}
BOUND = 20  # seconds: for what takes milliseconds, with room for a loaded machine


def build() -> Server:
    server = Server("loops", "1")
    server.add_extension(TasksExtension(poll_interval_ms=10))

    @server.tool(options={"tasks": "optional"})
    async def asker(ctx: Context) -> str:
        """Parks on one question; the answer comes through the owner's signal loop when it
        is sent to another worker."""
        answer = await ctx.input({"go": QUESTION})
        return f"go={answer['go']['content']['go']}"

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A lease long enough that a few failed heartbeats never make the worker lost: the
    first renewal (after a quarter lease) fails, the test needs a few requests before it
    lets the next one work, and the other worker judges only after a whole lease."""
    if request.param == "postgresql":
        cluster: Cluster = request.getfixturevalue("postgres")
        return cluster.new_database() + "&lease=10&timeout=5"
    return f"sqlite:///{tmp_path}/shared.db?poll=0.005&lease=10&timeout=5"


@asynccontextmanager
async def two_workers(url: str) -> AsyncIterator[tuple[Client, Client]]:
    server = build()
    async with (
        open_client(server.asgi_app(backend=url), capabilities=TASKS) as a,
        open_client(server.asgi_app(backend=url), capabilities=TASKS) as b,
    ):
        yield a, b


def backend_of(client: Client) -> SharedBackend:
    runtime = client.app.runtime
    assert runtime is not None
    assert isinstance(runtime.backend, SharedBackend)
    return runtime.backend


def health(client: Client) -> BackendHealth:
    runtime = client.app.runtime
    assert runtime is not None
    return runtime.backend_health()


class Fault:
    """Makes a database method raise ``OSError`` while ``on`` (for the calls ``which``
    picks), counting each time, and lets it work once switched off."""

    def __init__(self, method: Callable[..., Awaitable[Any]], which: Callable[..., bool]) -> None:
        self.method = method
        self.which = which
        self.on = True
        self.raised = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.on and self.which(*args, **kwargs):
            self.raised += 1
            await trio.lowlevel.checkpoint()
            raise OSError(5, "Input/output error")
        return await self.method(*args, **kwargs)


async def until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(BOUND):
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.005)


async def still_serving(a: Client, b: Client) -> str:
    """A tool call and a task creation on ``a``; the task's id (parked on its question)."""
    echoed = await a.call_tool("echo", {"text": "up"})
    assert echoed["content"] == [{"type": "text", "text": "up"}]
    task_id = await a.create_task("asker")
    with trio.fail_after(BOUND):
        parked = await b.wait_task(task_id, ("input_required",))
    assert parked["inputRequests"] == {"go": QUESTION}
    return task_id


async def answered_across_workers(a: Client, b: Client, task_id: str) -> None:
    """``b`` answers the task ``a`` runs: a signal ``a``'s loop must read."""
    await b.update_task(task_id, {"go": YES})
    with trio.fail_after(BOUND):
        done = await b.wait_task(task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "go=True"}]


def unexpected(caplog: pytest.LogCaptureFixture, what: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.getMessage().startswith(f"the {what} failed")
    ]


async def test_a_failing_look_for_signals_is_retried_and_the_run_stays_up(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, one ``OSError`` from a look for signals ended the whole run (under ASGI the
    app then answered 503 until restarted)."""
    async with two_workers(url) as (a, b):
        backend = backend_of(a)
        kind = backend.kind
        fault = Fault(backend.db.changes, lambda *args, **kwargs: True)
        backend.db.changes = fault  # type: ignore[method-assign]
        await until(lambda: fault.raised >= 3 and not health(a).healthy)
        assert health(a) == BackendHealth(
            False, f"the {kind} signal loop fails: OSError (see the log)"
        )
        assert health(b) == BackendHealth(True)
        task_id = await still_serving(a, b)
        raised = fault.raised
        await until(lambda: fault.raised > raised)  # failing still: retried, still unhealthy
        assert not health(a).healthy
        fault.on = False
        await until(lambda: health(a).healthy)
        assert health(a) == BackendHealth(True)
        await answered_across_workers(a, b, task_id)
    logged = unexpected(caplog, f"{kind} signal loop")
    assert len(logged) == 1, "logged once per episode, not per try"
    assert logged[0].exc_info is not None
    assert isinstance(logged[0].exc_info[1], OSError)
    again = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert again.count(f"the {kind} signal loop works again") == 1


async def test_a_failing_heartbeat_is_retried_and_the_run_stays_up(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The heartbeat's write fails (every other write works): retried sooner than the
    next renewal, reported in the health, and the lease is renewed once it works."""
    async with two_workers(url) as (a, b):
        backend = backend_of(a)
        kind = backend.kind
        beat = SharedBackend._beat

        def is_heartbeat(fn: Any) -> bool:
            return getattr(fn, "__func__", None) is beat

        fault = Fault(backend.db.write, is_heartbeat)
        backend.db.write = fault  # type: ignore[method-assign]
        await until(lambda: fault.raised >= 3 and not health(a).healthy)
        assert health(a) == BackendHealth(
            False, f"the {kind} heartbeat fails: OSError (see the log)"
        )
        assert not backend.judges_leases, "a worker whose heartbeat fails judges no one"
        task_id = await still_serving(a, b)
        fault.on = False
        await until(lambda: health(a).healthy)
        assert health(a) == BackendHealth(True)
        await answered_across_workers(a, b, task_id)
    logged = unexpected(caplog, f"{kind} heartbeat")
    assert len(logged) == 1, "logged once per episode, not per try"
    assert logged[0].exc_info is not None
    assert isinstance(logged[0].exc_info[1], OSError)


async def test_the_memory_backend_is_always_healthy() -> None:
    async with open_client(build()) as client:
        assert health(client) == BackendHealth(True)


async def test_a_failing_listen_connection_on_postgresql_is_replaced(
    postgres: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The wait for notifications itself fails (in the worker thread, on the listening
    connection, for both workers): the connection is closed, the loop tries again on a new
    one, the run serves meanwhile, and a signal sent after it works is delivered."""
    url = postgres.new_database() + "&lease=5&timeout=5"
    failing = [True]
    raised: list[int] = []
    notifies = psycopg.Connection.notifies

    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        if failing[0]:
            raised.append(1)
            raise OSError(5, "Input/output error")
        return notifies(self, *args, **kwargs)

    async with two_workers(url) as (a, b):
        monkeypatch.setattr(psycopg.Connection, "notifies", broken)
        await until(lambda: len(raised) >= 6 and not health(a).healthy)
        assert health(a) == BackendHealth(
            False, "the postgresql signal loop fails: OSError (see the log)"
        )
        task_id = await still_serving(a, b)
        failing[0] = False
        await until(lambda: health(a).healthy and health(b).healthy)
        await answered_across_workers(a, b, task_id)
    logged = unexpected(caplog, "postgresql signal loop")
    assert len(logged) == 2, "once per worker"


def test_a_failing_loop_waits_twice_as_long_each_time_up_to_a_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A loop's failures: the delay doubles from the first to the bound and a success
    resets it; an unexpected error is logged once per episode with its traceback, a
    ``StorageUnavailable`` not at all (the database logged it), and both are the reason."""
    retry = Retry("test loop", 0.01, 0.05)
    assert retry.failing is None
    delays = [retry.failed(OSError(5, "Input/output error")) for _ in range(5)]
    assert delays == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert retry.failing == "OSError (see the log)"
    retry.worked()
    assert retry.failing is None
    assert retry.failed(StorageUnavailable("its database file was deleted")) == 0.01
    assert retry.failing == "its database file was deleted"
    retry.worked()
    logged = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert logged == [
        ("ERROR", "the test loop failed; it tries again, waiting at most 0.05 s", True),
        ("WARNING", "the test loop works again", False),
    ]


def test_a_failing_loop_lets_what_is_not_an_error_through() -> None:
    retry = Retry("test loop", 0.01, 0.05)
    with pytest.raises(KeyboardInterrupt):
        retry.failed(KeyboardInterrupt())
    with pytest.raises(BaseExceptionGroup) as raised:
        retry.failed(BaseExceptionGroup("both", [OSError(), KeyboardInterrupt()]))
    assert raised.group_contains(KeyboardInterrupt)
    assert not raised.group_contains(OSError)


async def test_a_failing_signal_loop_backs_off_and_is_cancelled_as_usual(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Every look failing (before any database work: no thread, so virtual time holds),
    the loop tries again after 0.01, 0.02, 0.04 ... seconds up to ``MAX_BACKOFF``; a
    cancellation that arrives in a look ends it like any other task, neither logged nor
    taken for a failure."""
    db = SqliteDatabase(str(tmp_path / "never-opened.db"))
    backend = SharedBackend(db, lease=20.0, poll=0.01)
    looks: list[float] = []

    async def failing(*args: Any) -> None:
        looks.append(trio.current_time())
        if len(looks) > 12:
            await trio.sleep_forever()  # the cancellation comes in here
        await trio.lowlevel.checkpoint()
        raise OSError(5, "Input/output error")

    db.changes = failing  # type: ignore[assignment, method-assign]
    with trio.move_on_after(60) as waited:
        await backend._watch_loop()
    assert waited.cancelled_caught
    waits = [round(b - a, 6) for a, b in itertools.pairwise(looks)]
    assert waits == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, *[MAX_BACKOFF] * 4]
    assert backend.health() == BackendHealth(
        False, "the sqlite signal loop fails: OSError (see the log)"
    )
    assert [r.getMessage() for r in caplog.records] == [
        "the sqlite signal loop failed; it tries again, waiting at most 2 s"
    ]
