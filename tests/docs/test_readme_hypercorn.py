"""What the documentation (docs/guides/limits.md and deploying.md, docs/reference/limits.md,
docs/cancellation.md) says plain hypercorn (0.18, ``--worker-class trio``) does, checked
against it serving ``slow_app`` on 127.0.0.1 with raw clients:

- a request head still arriving past 16 KiB (``h11_max_incomplete_size``) is answered 431 and
  the connection closed;
- a head that never completes, or no bytes at all, is closed by the keep-alive timer
  (``--keep-alive``), with no ``--read-timeout`` set;
- ``--read-timeout`` closes a connection whose client is silent: a listen stream and a slow
  answer are cut, with no final result;
- at SIGTERM, a listen stream is cut without its final result once hypercorn's graceful
  timeout (3 s by default) has run out;
- embedded (``hypercorn.trio.serve``), a shutdown trigger that calls ``app.begin_draining()``
  ends it with its final result instead (docs/cancellation.md's block, run as written);
- with ``--workers 2``, one worker killed stops the other and the master, which exits 0;
- the README's Quickstart ``app.py`` served by its command answers at ``/mcp``.
"""

from __future__ import annotations

import os
import re
import signal
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import h11
import httpx
import pytest
import trio
from hypercorn.config import Config
from support.live_http import Connection, mcp_request, open_exchange
from support.servers import ROOT, Served, free_port, running

from presa_trio import Server

pytestmark = pytest.mark.e2e

HERE = ROOT / "tests" / "support"
LISTEN = {"notifications": {"toolsListChanged": True}}
CUT = (EOFError, h11.RemoteProtocolError, trio.BrokenResourceError)


@pytest.fixture(scope="module")
def keep_alive_1() -> Iterator[int]:
    with running("slow_app:app", HERE, args=["--keep-alive", "1"]) as served:
        yield served.port


@pytest.fixture(scope="module")
def read_timeout_1() -> Iterator[int]:
    with running("slow_app:app", HERE, args=["--read-timeout", "1"]) as served:
        yield served.port


async def until_closed(stream: trio.SocketStream) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    try:
        while data := await stream.receive_some(65536):
            received += data
    except trio.BrokenResourceError:  # closed abortively
        pass
    return received


def head(
    port: int,
    padding: int = 0,
    *,
    complete: bool = True,
    method: str = "server/discover",
    params: dict[str, Any] | None = None,
) -> bytes:
    """A request on the wire, with a header of ``padding`` bytes; without its end when not
    ``complete``."""
    body, headers = mcp_request(method, params)
    lines = ["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines += [f"Content-Length: {len(body)}", f"X-Padding: {'a' * padding}"]
    text = "\r\n".join(lines).encode()
    return text + b"\r\n\r\n" + body if complete else text


async def test_a_request_head_past_16_kib_is_431_and_closed(keep_alive_1: int) -> None:
    with trio.fail_after(10):
        async with await trio.open_tcp_stream("127.0.0.1", keep_alive_1) as stream:
            await stream.send_all(head(keep_alive_1, 15 * 1024, complete=True))
            answered = await until_closed(stream)
        async with await trio.open_tcp_stream("127.0.0.1", keep_alive_1) as stream:
            await stream.send_all(head(keep_alive_1, 17 * 1024, complete=False))
            refused = await until_closed(stream)
    assert answered.startswith(b"HTTP/1.1 200 ")  # under the bound: served
    assert refused.startswith(b"HTTP/1.1 431 ")


@pytest.mark.parametrize("dribble", [False, True], ids=["silent", "slowloris"])
async def test_the_keep_alive_timer_closes_a_head_that_never_completes(
    keep_alive_1: int, dribble: bool
) -> None:
    async with await trio.open_tcp_stream("127.0.0.1", keep_alive_1) as stream:
        started = trio.current_time()
        with trio.fail_after(15):  # never closed at all, without the timer
            async with trio.open_nursery() as nursery:
                if dribble:  # one header line every 0.2 s, never the blank line
                    nursery.start_soon(slowloris, stream, keep_alive_1)
                received = await until_closed(stream)
                nursery.cancel_scope.cancel()
        elapsed = trio.current_time() - started
    assert received == b""  # no answer: the connection is just closed
    assert elapsed >= 0.9  # by the 1 s timer, not at once


async def slowloris(stream: trio.SocketStream, port: int) -> None:
    await stream.send_all(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
    try:
        for n in range(1000):
            await trio.sleep(0.2)
            await stream.send_all(f"X-Line-{n}: a\r\n".encode())
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # closed by the server


@asynccontextmanager
async def listening(port: int) -> AsyncIterator[Connection]:
    body, headers = mcp_request("subscriptions/listen", LISTEN, request_id=7)
    async with open_exchange(port, body, headers) as stream:
        assert stream.status == 200
        ack = await stream.next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        yield stream


async def after_the_cut(stream: Connection) -> list[dict[str, Any]]:
    """The messages that arrive before the stream is cut (it must be: CUT, not its end)."""
    got: list[dict[str, Any]] = []
    with pytest.raises(CUT):
        while True:
            got.append(await stream.next_message())
    return got


async def test_read_timeout_cuts_a_quiet_listen_stream_and_a_slow_answer(
    read_timeout_1: int,
) -> None:
    with trio.fail_after(45):  # margins of ten times and more over the 1 s timeout
        async with listening(read_timeout_1) as stream:
            assert await after_the_cut(stream) == []  # no final result
        nap = {"name": "nap", "arguments": {"seconds": 30}}
        async with await trio.open_tcp_stream("127.0.0.1", read_timeout_1) as stream:
            await stream.send_all(head(read_timeout_1, method="tools/call", params=nap))
            started = trio.current_time()
            answer = await until_closed(stream)
            elapsed = trio.current_time() - started
    assert answer == b""  # closed before the answer was ready: nothing at all
    assert elapsed < 30


@pytest.fixture
def plain() -> Iterator[Served]:
    with running("slow_app:app", HERE) as served:
        yield served


async def test_at_sigterm_a_listen_stream_is_cut_when_the_graceful_timeout_ends(
    plain: Served,
) -> None:
    with trio.fail_after(45):
        async with listening(plain.port) as stream:
            plain.process.send_signal(signal.SIGTERM)
            signalled = trio.current_time()
            assert await after_the_cut(stream) == []  # no final result
            elapsed = trio.current_time() - signalled
    assert elapsed >= 2.5  # hypercorn's graceful timeout, 3 s by default


def embedded_example() -> str:
    """docs/cancellation.md's embedded-hypercorn block, as the body of ``run(app, config,
    stop)`` (it awaits at its top level, as it would inside your own function)."""
    text = (ROOT / "docs" / "cancellation.md").read_text()
    found = re.search(r"```python\n# embedded example: hypercorn\n(.*?)```", text, re.S)
    assert found is not None, "docs/cancellation.md lost its embedded hypercorn example"
    return "async def run(app, config, stop):\n" + textwrap.indent(found.group(1), "    ")


async def test_embedded_hypercorn_drains_in_its_shutdown_trigger() -> None:
    server = Server("embedded")

    @server.tool()
    def touch() -> str:
        """Something whose list a client can listen to."""
        return "touched"

    app = server.asgi_app()
    config = Config()
    port = free_port()
    config.bind = [f"127.0.0.1:{port}"]
    namespace: dict[str, Any] = {}
    exec(compile(embedded_example(), "cancellation.md:embedded", "exec"), namespace)
    stop = trio.Event()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(namespace["run"], app, config, stop)
            while True:  # up once it answers
                try:
                    await (await trio.open_tcp_stream("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await trio.sleep(0.05)
            async with listening(port) as stream:
                stop.set()
                final = await stream.next_message()
    assert final["id"] == 7
    assert final["result"]["resultType"] == "complete"


def workers_of(master: int) -> list[int]:
    """hypercorn's worker processes (``spawn`` children) under ``master``."""
    found = []
    for task in Path(f"/proc/{master}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
            except FileNotFoundError:
                pass
    return found


def test_one_worker_killed_stops_plain_hypercorn_which_exits_0() -> None:
    with running("slow_app:app", HERE, args=["--workers", "2"]) as served:
        deadline = time.monotonic() + 30
        while len(workers := workers_of(served.process.pid)) < 2:
            assert time.monotonic() < deadline, "hypercorn did not start two workers"
            time.sleep(0.05)
        os.kill(workers[0], signal.SIGKILL)  # the OOM killer's way
        status = served.process.wait(timeout=60)
        survivor_gone = not Path(f"/proc/{workers[1]}").exists()
    assert status == 0  # so a manager that restarts on failure does not restart it
    assert survivor_gone


def test_the_quickstart_app_answers_at_mcp(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    found = re.search(r"```python\n(# app.py\n.*?)```", text, re.S)
    assert found is not None, "README.md lost its Quickstart app.py"
    command = "hypercorn --worker-class trio --bind 127.0.0.1:8000 app:app   # MCP endpoint: /mcp"
    assert command in text
    (tmp_path / "app.py").write_text(found.group(1))
    with running("app:app", tmp_path) as served:  # that command, on a free port
        call = {"name": "forecast", "arguments": {"city": "Oslo"}}
        body, headers = mcp_request("tools/call", call)
        answer = httpx.post(f"http://127.0.0.1:{served.port}/mcp", content=body, headers=headers)
    assert answer.status_code == 200
    forecast = "Oslo: sunny for 3 days"
    assert answer.json()["result"]["content"] == [{"type": "text", "text": forecast}]


def test_the_defaults_the_readme_names_are_hypercorns() -> None:
    defaults = Config()
    assert defaults.keep_alive_timeout == 5  # "Idle keep-alive connection | 5 s"
    assert defaults.h11_max_incomplete_size == 16 * 1024  # "16 KiB (h11_max_incomplete_size)"
    assert defaults.graceful_timeout == 3  # "its graceful timeout (3 s by default)"
    assert defaults.read_timeout is None  # no --read-timeout unless set
