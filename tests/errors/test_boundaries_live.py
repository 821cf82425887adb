"""Error boundaries and draining, against real processes on 127.0.0.1.

A failing tool cleanup, a failing task store and a crashing extension service must each stay
where they happened: the process keeps serving, other work completes, and the ASGI lifespan
still shuts down cleanly. ``presa-trio serve --http`` ends open listen streams with their
final result at SIGTERM instead of letting hypercorn's graceful timeout cut them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from support.boundary_app import CLEANUP_ERROR, DOOMED, SERVICE_ERROR, STORE_ERROR
from support.live_http import call, mcp_request, open_exchange, request, tool
from support.servers import ROOT, Served, free_port, running

pytestmark = pytest.mark.e2e

HERE = ROOT / "tests" / "support"  # the app it serves
TASKS_ID = "io.modelcontextprotocol/tasks"
TASKS: dict[str, Any] = {"extensions": {TASKS_ID: {}}}
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "boundaries", "version": "1.0"}}
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
LIFESPAN_FAILURES = (
    "lifespan.shutdown.failed",
    "LifespanFailureError",
    "ASGI Framework Lifespan error",
    "the server's run failed after startup",
)


@pytest.fixture
def boundary_server(tmp_path: Path) -> Iterator[Served]:
    with running("boundary_app:app", HERE, tmp_path / "hypercorn.log") as served:
        yield served


@pytest.fixture
def fragile_server(tmp_path: Path) -> Iterator[Served]:
    with running("boundary_app:fragile_app", HERE, tmp_path / "hypercorn.log") as served:
        yield served


async def create_task(port: int, name: str, arguments: dict[str, Any] | None = None) -> str:
    result = await call(
        port, "tools/call", {"name": name, "arguments": arguments or {}}, capabilities=TASKS
    )
    assert result["resultType"] == "task", result
    assert result["status"] == "working", result
    task_id: str = result["taskId"]
    return task_id


async def task_method(port: int, method: str, task_id: str) -> dict[str, Any]:
    """``tasks/get`` or ``tasks/cancel``: its result, after checking the HTTP exchange."""
    body, headers = mcp_request(method, {"taskId": task_id}, capabilities=TASKS)
    response = await request(port, body, [*headers, ("mcp-name", task_id)])
    assert response.status == 200, response
    assert response.headers["content-type"].startswith("application/json"), response.headers
    [message] = response.messages
    assert set(message) == {"jsonrpc", "id", "result"}, message
    result: dict[str, Any] = message["result"]
    return result


async def settle(port: int, task_id: str) -> dict[str, Any]:
    """Poll ``tasks/get`` (from outside: the server is another process) until terminal."""
    with trio.fail_after(10):
        while True:
            task = await task_method(port, "tasks/get", task_id)
            if task["status"] in ("completed", "failed", "cancelled"):
                return task
            await trio.sleep(0.02)


async def wait_for_stats(port: int, key: str, value: int) -> None:
    with trio.fail_after(10):
        while (await tool(port, "stats"))[key] < value:  # noqa: ASYNC110
            await trio.sleep(0.01)


async def wait_for_log(served: Served, text: str) -> str:
    """The log once it contains ``text`` (bounded: the server writes it asynchronously)."""
    with trio.fail_after(10):
        while text not in (log := served.log()):  # noqa: ASYNC110
            await trio.sleep(0.02)
    return log


async def text_tool(port: int, name: str, arguments: dict[str, Any] | None = None) -> str:
    """A plain (not task) call of a tool returning text: that text."""
    result = await call(port, "tools/call", {"name": name, "arguments": arguments or {}})
    assert result["resultType"] == "complete", result
    [content] = result["content"]
    assert content["type"] == "text", result
    text: str = content["text"]
    return text


async def discover_status(port: int) -> int:
    """The HTTP status of a ``server/discover``; a 200 must carry a complete result."""
    body, headers = mcp_request("server/discover")
    response = await request(port, body, headers)
    if response.status == 200:
        [message] = response.messages
        assert message["result"]["resultType"] == "complete", message
    return response.status


def completed_with(task: dict[str, Any], text: str) -> None:
    assert task["status"] == "completed", task
    assert task["result"] == {
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"result": text},  # a tool hinted -> str
    }


async def stop_cleanly(served: Served) -> str:
    """SIGTERM the supervisor: a graceful shutdown, lifespan included; exit 0, no failure.

    ``LifespanProbe`` (in the app) printed each lifespan message the app sent: exactly a
    startup and a shutdown completion, and the app's lifespan returned normally.
    """
    status = await trio.to_thread.run_sync(served.stop)
    log = served.log()
    assert status == 0, log
    for failure in LIFESPAN_FAILURES:
        assert failure not in log, log
    lifespan = [line for line in log.splitlines() if line.startswith("lifespan ")]
    assert lifespan == [
        "lifespan sent lifespan.startup.complete: ",
        "lifespan sent lifespan.shutdown.complete: ",
        "lifespan app returned",
    ], log
    return log


async def test_a_tool_whose_cleanup_raises_is_cancelled_and_nothing_else_is_hurt(
    boundary_server: Served,
) -> None:
    port = boundary_server.port
    napping = await create_task(port, "nap", {"seconds": 0.3})
    messy = await create_task(port, "messy")
    await wait_for_stats(port, "messy_started", 1)  # its child runs: a cancel reaches both

    with trio.fail_after(10):
        ack = await task_method(port, "tasks/cancel", messy)
    assert ack == {"resultType": "complete", "_meta": SERVER_INFO}
    stats = await tool(port, "stats")
    assert (stats["messy_started"], stats["cleanup_raised"]) == (1, 1)  # the cleanup did raise

    task = await task_method(port, "tasks/get", messy)
    assert (task["taskId"], task["status"], task["statusMessage"]) == (
        messy,
        "cancelled",
        "Cancellation requested",
    )
    assert "result" not in task and "error" not in task
    assert boundary_server.alive()

    completed_with(await settle(port, napping), "rested 0.3")
    assert await text_tool(port, "echo", {"text": "still here"}) == "still here"
    later = await create_task(port, "nap", {"seconds": 0.05})
    completed_with(await settle(port, later), "rested 0.05")
    assert boundary_server.alive()

    log = await stop_cleanly(boundary_server)
    assert f"task {messy} failed" in log  # the cleanup's error was logged, not lost
    assert f"OSError: {CLEANUP_ERROR}" in log


async def test_a_store_that_cannot_record_an_outcome_hurts_no_other_task(
    boundary_server: Served,
) -> None:
    port = boundary_server.port
    before = await create_task(port, "nap", {"seconds": 0.3})
    doomed = await create_task(port, DOOMED)
    # Its work is done; recording it fails, is retried three times (about 1.3 s), then given up.
    await wait_for_stats(port, "store_refusals", 4)
    stats = await tool(port, "stats")
    assert (stats["doomed_started"], stats["doomed_finished"], stats["store_refusals"]) == (1, 1, 4)

    # Its work finished but its outcome never reached the store: the record stays as created.
    task = await task_method(port, "tasks/get", doomed)
    assert (task["status"], task["statusMessage"]) == ("working", "Task accepted")
    assert "result" not in task

    assert boundary_server.alive()
    completed_with(await settle(port, before), "rested 0.3")
    after = await create_task(port, "nap", {"seconds": 0.05})
    completed_with(await settle(port, after), "rested 0.05")
    assert await text_tool(port, "echo", {"text": "still here"}) == "still here"
    assert await discover_status(port) == 200
    assert boundary_server.alive()

    log = await stop_cleanly(boundary_server)
    assert log.count(f"recording the outcome of task {doomed} failed once; retrying") == 3
    assert log.count("recording the outcome of task") == 4
    assert f"recording the outcome of task {doomed} failed\n" in log
    assert f"OSError: {STORE_ERROR} task {doomed}" in log


async def test_a_crashed_extension_service_does_not_stop_the_server(
    fragile_server: Served,
) -> None:
    port = fragile_server.port
    await trio.sleep(1)  # its service crashed 0.2 s after startup
    assert fragile_server.alive()
    assert await discover_status(port) == 200
    assert await text_tool(port, "ping") == "pong"
    log = await wait_for_log(fragile_server, "the service of extension com.example/fragile failed")
    assert f"RuntimeError: {SERVICE_ERROR}" in log
    assert await discover_status(port) == 200
    log = await stop_cleanly(fragile_server)
    assert log.count(f"RuntimeError: {SERVICE_ERROR}") == 1


@pytest.fixture
def cli_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """``presa-trio serve boundary_app:server --http 127.0.0.1:PORT``; its log file."""
    port = free_port()
    log_path = tmp_path / "presa-trio.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    command = [
        sys.executable,
        "-m",
        "presa_trio",
        "serve",
        "boundary_app:server",
        "--http",
        f"127.0.0.1:{port}",
    ]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process, port, log_path
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def test_sigterm_ends_a_listen_stream_with_its_final_result(
    cli_server: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    process, port, log_path = cli_server
    with trio.fail_after(30):  # up once it answers (the signal handler is in place by then)
        while True:
            try:
                assert await discover_status(port) == 200
                break
            except OSError:
                assert process.poll() is None, log_path.read_bytes().decode(errors="replace")
                await trio.sleep(0.05)

    body, headers = mcp_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id=77
    )
    with trio.fail_after(10):
        async with open_exchange(port, body, headers) as stream:
            assert stream.status == 200
            assert stream.headers["content-type"] == "text/event-stream"
            ack = await stream.next_message()
            assert ack == {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {
                    "_meta": {SUBSCRIPTION_ID: 77},
                    "notifications": {"toolsListChanged": True},
                },
            }

            process.send_signal(signal.SIGTERM)
            signalled = trio.current_time()
            with trio.move_on_after(2) as late:
                final = await stream.next_message()
            elapsed = trio.current_time() - signalled
            assert not late.cancelled_caught, "no final result within 2 s of SIGTERM"
            assert final == {
                "jsonrpc": "2.0",
                "id": 77,
                "result": {
                    "resultType": "complete",
                    "_meta": {SUBSCRIPTION_ID: 77, **SERVER_INFO},
                },
            }
            assert elapsed < 2
            with pytest.raises(EOFError):  # and the stream ends there
                await stream.next_message()

    with trio.fail_after(10):
        status = await trio.to_thread.run_sync(process.wait)
    log = log_path.read_bytes().decode(errors="replace")
    assert status == 0, log
    assert "Traceback" not in log, log
