"""The SQLite file deleted, replaced or recreated under a running server: no creation is
acknowledged into a file no one will read again; each is durable or refused with a
retryable 503, and one error line says what happened. The worker refuses until it is
restarted (``SqliteDatabase`` says why it does not pick up a new file); a restart opens
the file at the path."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from presa_trio import Context, Server
from presa_trio._backends import sqlite as _sqlite
from presa_trio._backends.sqlite import SqliteDatabase, check_file
from presa_trio.backends import BackendHealth, SharedBackend, StorageUnavailable, open_backend
from presa_trio.ext.tasks import TasksExtension
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, RpcError, open_client

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
QUESTION = elicit("Go?", {"go": {"type": "boolean"}}, ["go"])
REFUSED = (503, -32603, "Shared state is unavailable; retry later", {"retryable": True})
RESTART = "its database file was {}; restart this worker"


def build() -> Server:
    server = Server("file", "1")
    server.add_extension(TasksExtension(poll_interval_ms=10))

    @server.tool(options={"tasks": "optional"})
    async def asker(ctx: Context) -> str:
        """Parks on one question (so nothing is written after its creation)."""
        answer = await ctx.input({"go": QUESTION})
        return f"go={answer['go']['content']['go']}"

    @server.tool()
    def echo(text: str) -> str:
        """Needs no store."""
        return text

    return server


def store_url(path: Path) -> str:
    return f"sqlite:///{path}?poll=0.005&lease=0.4&timeout=2"


def remove_database(path: Path) -> None:
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)


def health(client: Client) -> BackendHealth:
    runtime = client.app.runtime
    assert runtime is not None
    return runtime.backend_health()


async def create_some(client: Client, count: int) -> tuple[list[str], int]:
    """``count`` creations: the ids acknowledged, and how many were refused (each refusal
    checked to be the retryable 503)."""
    acknowledged: list[str] = []
    refused = 0
    for _ in range(count):
        try:
            acknowledged.append(await client.create_task("asker"))
        except RpcError as failed:
            assert (failed.status, failed.code, failed.message, failed.data) == REFUSED
            refused += 1
    return acknowledged, refused


async def until_told_to_restart(client: Client, how: str) -> None:
    """Until the health says the worker needs a restart (an ordinary failure may come first:
    a statement that fails as the files go). The heartbeat or the signal loop finds it
    within a second; the bound is ten times the load's."""
    wanted = {
        f"the sqlite {loop} fails: {RESTART.format(how)}" for loop in ("heartbeat", "signal loop")
    }
    with trio.fail_after(20):
        while health(client).reason not in wanted:  # noqa: ASYNC110
            await trio.sleep(0.01)
    assert not health(client).healthy


def file_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name == "presa_trio.sqlite"
    ]


def error_line(how: str) -> str:
    names = "no file now" if how == "deleted" else "another file now"
    return (
        f"the sqlite store's database file was {how} under this running worker (its path "
        f"names {names}): it writes nothing more, and requests that need the store get 503 "
        "until the worker is restarted"
    )


async def assert_durable(server: Server, path: Path, ids: list[str], unknown: list[str]) -> None:
    """After a restart on ``path``: every id of ``ids`` is there (in whatever state the
    shutdown that stopped its worker left it), every one of ``unknown`` is not (-32602)."""
    async with open_client(server.asgi_app(backend=store_url(path)), capabilities=TASKS) as again:
        for task_id in ids:
            assert (await again.get_task(task_id))["taskId"] == task_id
        for task_id in unknown:
            with pytest.raises(RpcError) as missing:
                await again.get_task(task_id)
            assert (missing.value.status, missing.value.code) == (400, -32602)


async def test_creations_after_the_file_is_deleted_are_refused_never_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``rm presa.db presa.db-wal presa.db-shm`` under a running server: it went on
    acknowledging creations into the unlinked file (10 of 10), all unknown after a
    restart, and logged nothing. Now every creation is refused, retryable; requests that
    need no store carry on; one error line, and the health, say why."""
    path = tmp_path / "presa.db"
    server = build()
    async with open_client(server.asgi_app(backend=store_url(path)), capabilities=TASKS) as a:
        before = await a.create_task("asker")
        assert health(a) == BackendHealth(True)
        remove_database(path)
        acknowledged, refused = await create_some(a, 10)
        assert (acknowledged, refused) == ([], 10)
        echoed = await a.call_tool("echo", {"text": "still here"})
        assert echoed["content"] == [{"type": "text", "text": "still here"}]
        await until_told_to_restart(a, "deleted")
        assert not path.exists(), "a refusing worker made a new file"
    assert file_errors(caplog) == [error_line("deleted")]
    assert not any(str(tmp_path) in r.getMessage() for r in caplog.records)
    await assert_durable(server, path, acknowledged, [before])


async def test_a_file_replaced_under_a_running_server_is_not_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``mv other.db presa.db``: the old file is unlinked, the path names another. The
    worker writes into neither; after a restart the server serves the file that was moved
    there. (With the old file's ``-wal`` and ``-shm`` removed, as SQLite needs: the new
    file would read the old one's log, which has the same name. The worker looks at the
    path before every commit, so it adds nothing to that log once the file is replaced.)"""
    path = tmp_path / "presa.db"
    other = tmp_path / "other.db"
    server = build()
    async with open_client(server.asgi_app(backend=store_url(other)), capabilities=TASKS) as o:
        theirs = await o.create_task("asker")
    async with open_client(server.asgi_app(backend=store_url(path)), capabilities=TASKS) as a:
        before = await a.create_task("asker")
        for log in (Path(f"{path}-wal"), Path(f"{path}-shm")):
            log.unlink()
        os.replace(other, path)  # at once: never a moment without a file at the path
        acknowledged, refused = await create_some(a, 10)
        assert (acknowledged, refused) == ([], 10)
        with pytest.raises(RpcError) as failed:  # reading is refused too: not the file
            await a.get_task(before)
        assert (failed.value.status, failed.value.code) == (503, -32603)
        await until_told_to_restart(a, "replaced")
    assert file_errors(caplog) == [error_line("replaced")]
    await assert_durable(server, path, [theirs], [before])


async def test_a_worker_refuses_a_file_recreated_at_its_path_until_it_restarts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleted, then a new file at the path (a worker started after the deletion makes
    one): the old worker keeps refusing rather than pick it up (its signals, its tasks,
    its lease belong to the old file), the new worker serves the new file, and after a
    restart every creation the new file acknowledged is there."""
    path = tmp_path / "presa.db"
    server = build()
    async with open_client(server.asgi_app(backend=store_url(path)), capabilities=TASKS) as a:
        await a.create_task("asker")
        remove_database(path)
        assert await create_some(a, 1) == ([], 1)
        async with open_client(server.asgi_app(backend=store_url(path)), capabilities=TASKS) as new:
            made, refused = await create_some(new, 5)
            assert (len(made), refused) == (5, 0)
            assert await create_some(a, 5) == ([], 5)
            for task_id in made:
                with pytest.raises(RpcError) as failed:
                    await a.get_task(task_id)
                assert (failed.value.status, failed.value.code) == (503, -32603)
            await until_told_to_restart(a, "deleted")
            assert health(new) == BackendHealth(True)
    assert file_errors(caplog) == [error_line("deleted")]
    await assert_durable(server, path, made, [])


# ------------------------------------------------------------------------------ the checks


def count_rows(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM t").fetchone()[0])


async def test_a_write_is_not_committed_when_the_file_goes_before_its_commit(
    tmp_path: Path,
) -> None:
    """The path is looked at inside the write, before ``COMMIT``: a file deleted while a
    write runs gets nothing (it is rolled back), and the caller gets ``StorageUnavailable``.
    (Seen through a second name for the file, put back at the path afterwards: it reads
    the log that a commit would have gone to.)"""
    path = tmp_path / "presa.db"
    check_file(str(path))
    db = SqliteDatabase(str(path))
    kept = tmp_path / "kept.db"

    def insert_then_lose_the_file(conn: Any) -> None:
        conn.execute("INSERT INTO t VALUES (1)")
        path.unlink()

    try:
        await db.write(lambda conn: conn.execute("CREATE TABLE t (k INTEGER)"))
        await db.run(lambda conn: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
        os.link(path, kept)
        with pytest.raises(StorageUnavailable) as refused:
            await db.write(insert_then_lose_the_file)
        assert refused.value.reason == RESTART.format("deleted")
    finally:
        await db.aclose()
    os.replace(kept, path)
    assert count_rows(path) == 0, "the write was committed into the deleted file"


async def test_a_statement_run_alone_is_not_acknowledged_when_the_file_went_meanwhile(
    tmp_path: Path,
) -> None:
    """A statement that commits by itself (a signal's row) is checked after it: the file
    replaced while it ran, the caller gets ``StorageUnavailable``, not its result."""
    path = tmp_path / "presa.db"
    check_file(str(path))
    db = SqliteDatabase(str(path))
    try:
        await db.write(lambda conn: conn.execute("CREATE TABLE t (k INTEGER)"))
        replacement = tmp_path / "new.db"
        check_file(str(replacement))

        def insert_then_replace(conn: Any) -> int:
            conn.execute("INSERT INTO t VALUES (1)")
            os.replace(replacement, path)
            return 1

        with pytest.raises(StorageUnavailable) as refused:
            await db.run(insert_then_replace)
        assert refused.value.reason == RESTART.format("replaced")
    finally:
        await db.aclose()


async def test_the_signal_watcher_notices_the_file_gone_and_it_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The look for signals (on a connection of its own) refuses a file that is gone, as
    every later call does, logged once however many calls there are; a new file at the
    path changes nothing."""
    path = tmp_path / "presa.db"
    check_file(str(path))
    db = SqliteDatabase(str(path))
    awake = trio.Event()
    awake.set()
    try:
        assert await db.changes(0, False, 0.01, awake) == []
        remove_database(path)
        for _ in range(3):
            with pytest.raises(StorageUnavailable):
                await db.changes(0, False, 0.01, awake)
        check_file(str(path))  # a file at the path again
        with pytest.raises(StorageUnavailable):
            await db.run(lambda conn: conn.execute("SELECT 1").fetchone())
        with pytest.raises(StorageUnavailable):
            await db.changes(0, False, 0.01, awake)
    finally:
        await db.aclose()
    assert file_errors(caplog) == [error_line("deleted")]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == [
        r for r in caplog.records if r.levelno >= logging.ERROR
    ], "also logged as an ordinary failure"


async def test_a_file_deleted_as_a_connection_opens_is_not_made_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleted between the look at the path and the opening of a connection (the watch's
    first, here): SQLite would make an empty file there, which every worker would then take
    for a replacement. Only the first connection may create the file."""
    path = tmp_path / "presa.db"
    check_file(str(path))
    db = SqliteDatabase(str(path))
    opening = _sqlite.connect

    def deleted_first(*args: Any, **kwargs: Any) -> Any:
        remove_database(path)
        return opening(*args, **kwargs)

    awake = trio.Event()
    awake.set()
    try:
        assert await db.run(lambda conn: conn.execute("SELECT 1").fetchone()) == (1,)
        monkeypatch.setattr(_sqlite, "connect", deleted_first)
        with pytest.raises(StorageUnavailable) as refused:
            await db.changes(0, False, 0.01, awake)
        assert refused.value.reason == RESTART.format("deleted")
    finally:
        await db.aclose()
    assert not path.exists(), "an empty file was made where the file was deleted"
    assert file_errors(caplog) == [error_line("deleted")]


async def test_a_backend_whose_file_is_deleted_reports_it_in_its_health(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/presa.db?poll=0.005&lease=0.2"
    async with open_backend(url) as backend:
        assert isinstance(backend, SharedBackend)
        assert backend.health() == BackendHealth(True)
        remove_database(tmp_path / "presa.db")
        wanted = {
            BackendHealth(False, f"the sqlite {loop} fails: {RESTART.format('deleted')}")
            for loop in ("heartbeat", "signal loop")
        }
        with trio.fail_after(20):  # found within a second, by one loop or the other
            while backend.health() not in wanted:  # noqa: ASYNC110
                await trio.sleep(0.01)
