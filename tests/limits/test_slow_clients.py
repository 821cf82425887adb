"""Slow and idle clients against a real ``hypercorn --worker-class trio`` on 127.0.0.1.

Every client here is a raw TCP socket that misbehaves on purpose: it never sends a byte,
dribbles its headers or its body, never reads a large answer, or sits idle on a keep-alive
connection. Each test measures from the client side whether, and after how long, the server
released the connection, and from ``/proc`` what the worker process still holds. The app
(``slow_app``) and hypercorn's flags use short deadlines so that every bound is seconds:
``--keep-alive 1 --read-timeout 2``, ``Timeouts(body=2, write=2)``.

Two bugs this harness found are fixed and kept as tests (details in ``SLOW-CLIENTS.md``): a
connected client that never reads was never dropped (hypercorn's trio worker shields its socket
writes; ``presa-trio serve`` now puts the write deadline on the socket as ``TCP_USER_TIMEOUT``),
and ``presa-trio serve`` set hypercorn's read timeout by default, which cut every listen stream
and every slow answer (it is now unset unless asked for).

Set ``SLOW_CLIENTS_FIGURES=/some/file.json`` to have the measured figures written there
(``SLOW-CLIENTS.md`` tabulates one run).
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from support.live_http import mcp_request
from support.servers import ROOT, Served, _stop_group, free_port
from support.slow_app import BODY_TIMEOUT, WRITE_TIMEOUT

pytestmark = pytest.mark.e2e

HERE = ROOT / "tests" / "support"  # the app it serves
KEEP_ALIVE = 1  # hypercorn --keep-alive (an integer there)
READ_TIMEOUT = 2  # hypercorn --read-timeout (an integer there)
FLAGS = ("--keep-alive", str(KEEP_ALIVE), "--read-timeout", str(READ_TIMEOUT))
MARGIN = 1.5  # scheduling slack on top of a documented deadline
BIG = 8_000_000  # bytes of text in the large result nobody reads
FELL_BEHIND = "Listen stream fell behind; notifications were lost"

FIGURES: dict[str, Any] = {}


# ---------------------------------------------------------------------------- the server


@dataclass
class Worker:
    """A running server: hypercorn's supervisor (``served``) and the process serving."""

    served: Served
    pid: int

    @property
    def port(self) -> int:
        return self.served.port

    def fds(self) -> int:
        """Open file descriptors of the serving process."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_kb(self) -> int:
        """Resident memory of the serving process, in kB (``VmRSS``)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError(f"no VmRSS for {self.pid}")

    def log_count(self, text: str) -> int:
        return sum(text in line for line in self.served.log().splitlines())


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def _worker_pid(process: subprocess.Popen[bytes]) -> int:
    """The process that serves: hypercorn's ``spawn`` worker child (not its resource tracker)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for child in _children(process.pid):
            if b"spawn_main" in _cmdline(child):
                return child
        time.sleep(0.05)
    raise RuntimeError(f"no hypercorn worker under {process.pid}")


def _answers(port: int) -> bool:
    """Whether a real request is answered (the listening socket alone is not the worker)."""
    body, headers = mcp_request("server/discover")
    head = "".join(f"{name}: {value}\r\n" for name, value in headers)
    data = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
        f"Content-Length: {len(body)}\r\n{head}\r\n"
    ).encode() + body
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(data)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    except OSError:
        return False
    return answer.startswith(b"HTTP/1.1 200")


@contextmanager
def launch(
    target: str, *flags: str, log_path: Path, nofile: int | None = None, cli: bool = False
) -> Iterator[Worker]:
    """Serve ``target`` on 127.0.0.1 until the block ends, like ``conftest.running`` but with
    extra command-line ``flags`` and optionally a low ``RLIMIT_NOFILE``. ``cli`` runs
    ``presa-trio serve`` (hypercorn in-process) instead of ``hypercorn`` (supervisor and
    worker)."""
    port = free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    if cli:
        command = ["-m", "presa_trio", "serve", target, "--http", f"127.0.0.1:{port}", *flags]
    else:
        command = ["-m", "hypercorn", "--worker-class", "trio"]
        command += ["--bind", f"127.0.0.1:{port}", *flags, target]
    limit = None
    if nofile is not None:
        limit = partial(resource.setrlimit, resource.RLIMIT_NOFILE, (nofile, nofile))
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, *command],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=limit,
        )
    served = Served(port, process, log_path)
    try:
        deadline = time.monotonic() + 30
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{target} did not start on {port}:\n{served.log()}")
            time.sleep(0.05)
        yield Worker(served, process.pid if cli else _worker_pid(process))
    finally:
        _stop_group(process)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    log_path = tmp_path_factory.mktemp("slow") / "hypercorn.log"
    with launch("slow_app:app", *FLAGS, log_path=log_path) as worker:
        yield worker


@pytest.fixture(scope="module")
def big_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """A server of its own for the large-result tests: nothing else moves its fd/RSS."""
    log_path = tmp_path_factory.mktemp("big") / "hypercorn.log"
    with launch("slow_app:app", *FLAGS, log_path=log_path) as worker:
        yield worker


@pytest.fixture
def lowfd_server(tmp_path: Path) -> Iterator[Worker]:
    """hypercorn started with RLIMIT_NOFILE 256 (its worker inherits it)."""
    with launch("slow_app:app", *FLAGS, log_path=tmp_path / "hypercorn.log", nofile=256) as w:
        yield w


CLI_FLAGS = ("--keep-alive", str(KEEP_ALIVE), "--body-timeout", str(BODY_TIMEOUT))
CLI_FLAGS += ("--write-timeout", str(WRITE_TIMEOUT))


@pytest.fixture
def cli_server(tmp_path: Path) -> Iterator[Worker]:
    """``presa-trio serve`` with short deadlines from its own command line (and, as by
    default, no ``--read-timeout``)."""
    with launch("slow_app:server", *CLI_FLAGS, log_path=tmp_path / "serve.log", cli=True) as w:
        yield w


@pytest.fixture(scope="module")
def cli_big_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """``presa-trio serve`` for the non-reader: its listening socket carries the write
    deadline as ``TCP_USER_TIMEOUT``."""
    log_path = tmp_path_factory.mktemp("cli-big") / "serve.log"
    with launch("slow_app:server", *CLI_FLAGS, log_path=log_path, cli=True) as worker:
        yield worker


@pytest.fixture(scope="module", autouse=True)
def figures() -> Iterator[dict[str, Any]]:
    yield FIGURES
    destination = os.environ.get("SLOW_CLIENTS_FIGURES")
    if destination:
        Path(destination).write_text(json.dumps(FIGURES, indent=2, sort_keys=True) + "\n")


def record(key: str, value: Any) -> None:
    FIGURES[key] = round(value, 3) if isinstance(value, float) else value


# ---------------------------------------------------------------------------- the client


def raw_request(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    port: int,
    version: str = "1.1",
    extra: Iterable[tuple[str, str]] = (),
    meta: dict[str, Any] | None = None,
) -> tuple[bytes, bytes]:
    """A complete MCP request as bytes on the wire: (head, body)."""
    body, headers = mcp_request(method, params, meta=meta)
    lines = [f"POST /mcp HTTP/{version}", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name}: {value}" for name, value in [*headers, *extra]]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), body


def tool_call(name: str, arguments: dict[str, Any], *, port: int, **kw: Any) -> bytes:
    head, body = raw_request("tools/call", {"name": name, "arguments": arguments}, port=port, **kw)
    return head + body


CLOSE = (("Connection", "close"),)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    messages: list[dict[str, Any]] = field(default_factory=list)


class Wire:
    """One raw client connection: bytes out as the test decides, an HTTP response parsed in
    (Content-Length, chunked or close-delimited), and the moment the server closes."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.eof = False
        self.framing = "close"
        self.remaining = 0
        self._sse = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def _fill(self) -> bool:
        """Read more; False once the server has closed (FIN or RST)."""
        if self.eof:
            await trio.lowlevel.checkpoint()
            return False
        try:
            data = await self.stream.receive_some(65536)
        except trio.BrokenResourceError:  # ECONNRESET: closed by the server, abortively
            data = b""
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    async def _until(self, separator: bytes) -> bytes:
        while (at := self.buffer.find(separator)) < 0:
            if not await self._fill():
                raise EOFError(bytes(self.buffer))
        piece = bytes(self.buffer[:at])
        del self.buffer[: at + len(separator)]
        return piece

    async def _exact(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not await self._fill():
                raise EOFError(bytes(self.buffer))
        piece = bytes(self.buffer[:size])
        del self.buffer[:size]
        return piece

    async def head(self) -> tuple[int, dict[str, str]]:
        status_line, *lines = (await self._until(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            self.framing = "chunked"
        elif "content-length" in headers:
            self.framing, self.remaining = "length", int(headers["content-length"])
        else:
            self.framing = "close"
        self._sse = b""
        return int(status_line.split(" ")[1]), headers

    async def piece(self) -> bytes | None:
        """The next piece of the body; None at its end; EOFError when the server cut it."""
        if self.framing == "chunked":
            size = int((await self._until(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self._until(b"\r\n")
                return None
            data = await self._exact(size)
            await self._exact(2)
            return data
        if self.framing == "length":
            if self.remaining == 0:
                await trio.lowlevel.checkpoint()
                return None
            if not self.buffer and not await self._fill():
                raise EOFError(b"")
            data = bytes(self.buffer[: self.remaining])
            del self.buffer[: self.remaining]
            self.remaining -= len(data)
            return data
        if not self.buffer and not await self._fill():
            return None
        data = bytes(self.buffer)
        self.buffer.clear()
        return data

    async def response(self) -> Reply:
        status, headers = await self.head()
        chunks = []
        while (data := await self.piece()) is not None:
            chunks.append(data)
        body = b"".join(chunks)
        reply = Reply(status, headers, body)
        kind = headers.get("content-type", "")
        if kind.startswith("application/json"):
            reply.messages = [json.loads(body)]
        elif kind.startswith("text/event-stream"):
            reply.messages = [
                json.loads(line[5:]) for line in body.split(b"\n") if line.startswith(b"data:")
            ]
        return reply

    async def message(self) -> dict[str, Any] | None:
        """The next SSE ``data:`` message of a streamed body; None at the end of the body."""
        while True:
            while b"\n\n" not in self._sse:
                data = await self.piece()
                if data is None:
                    return None
                self._sse += data
            frame, self._sse = self._sse.split(b"\n\n", 1)
            for line in frame.split(b"\n"):
                if line.startswith(b"data:"):
                    message: dict[str, Any] = json.loads(line[5:])
                    return message

    async def closed(self) -> bytes:
        """Wait until the server closes the connection; whatever arrived meanwhile."""
        extra = bytes(self.buffer)
        self.buffer.clear()
        while await self._fill():
            extra += bytes(self.buffer)
            self.buffer.clear()
        return extra


async def connect(port: int, rcvbuf: int | None = None) -> trio.SocketStream:
    if rcvbuf is None:
        return await trio.open_tcp_stream("127.0.0.1", port)
    sock = trio.socket.socket()
    try:  # a small receive window: the server's writes block soon once we stop reading
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        await sock.connect(("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


@asynccontextmanager
async def open_wire(port: int, rcvbuf: int | None = None) -> AsyncIterator[Wire]:
    stream = await connect(port, rcvbuf)
    async with stream:
        yield Wire(stream)


async def closed_after(wire: Wire, bound: float) -> float:
    """Seconds until the server closes ``wire`` (TooSlowError past ``bound``); nothing more
    may arrive meanwhile."""
    start = trio.current_time()
    with trio.fail_after(bound):
        extra = await wire.closed()
    assert extra == b"", extra[:200]
    return trio.current_time() - start


async def call(port: int, name: str, arguments: dict[str, Any]) -> tuple[Any, float]:
    """A well-behaved ``tools/call`` (``Connection: close``): its result and its latency."""
    start = trio.current_time()
    with trio.fail_after(10):
        async with open_wire(port) as wire:
            await wire.send(tool_call(name, arguments, port=port, extra=CLOSE))
            reply = await wire.response()
    assert reply.status == 200, reply
    final = reply.messages[-1]
    assert "result" in final, final
    return final["result"], trio.current_time() - start


async def structured(port: int, name: str, arguments: dict[str, Any] | None = None) -> Any:
    result, _ = await call(port, name, arguments or {})
    return json.loads(result["content"][0]["text"])  # an int return's value, or a dict


async def dribble(wire: Wire, pieces: Iterable[bytes], interval: float) -> None:
    """Send ``pieces`` one at a time, ``interval`` apart, until done or the server closes."""
    try:
        for piece in pieces:
            await wire.send(piece)
            await trio.sleep(interval)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


def slow_headers(port: int) -> Iterator[bytes]:
    """A request head that never ends: a first line, then one more header line each time."""
    yield f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    for i in itertools.count():
        yield f"X-Slow-{i}: {i}\r\n".encode()


async def fds_settle(worker: Worker, at_most: int, bound: float) -> float:
    """Seconds until the worker holds at most ``at_most`` fds (TooSlowError past ``bound``)."""
    start = trio.current_time()
    with trio.fail_after(bound):
        while worker.fds() > at_most:  # noqa: ASYNC110
            await trio.sleep(0.05)
    return trio.current_time() - start


async def quiet_fds(worker: Worker) -> int:
    """The worker's fds at rest: the fewest over half a second (a connection the client has
    just finished with may take a moment to be closed on the server's side)."""
    fewest = worker.fds()
    for _ in range(5):
        await trio.sleep(0.1)
        fewest = min(fewest, worker.fds())
    return fewest


async def listeners(port: int) -> int:
    count: int = (await structured(port, "stats"))["listeners"]
    return count


async def open_listen(wire: Wire, port: int, notifications: dict[str, Any]) -> dict[str, Any]:
    """Start a listen stream on ``wire``; its acknowledgement's params."""
    head, body = raw_request("subscriptions/listen", {"notifications": notifications}, port=port)
    await wire.send(head + body)
    with trio.fail_after(5):
        status, headers = await wire.head()
        assert status == 200
        assert headers["content-type"].startswith("text/event-stream"), headers
        ack = await wire.message()
    assert ack is not None
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    params: dict[str, Any] = ack["params"]
    return params


# ---------------------------------------------------------------------------- 1-3: closing


async def test_connection_close_is_closed_right_after_the_response(server: Worker) -> None:
    async with open_wire(server.port) as wire:
        await wire.send(tool_call("echo", {"text": "bye"}, port=server.port, extra=CLOSE))
        with trio.fail_after(5):
            reply = await wire.response()
        assert reply.status == 200
        assert reply.messages[0]["result"]["content"][0]["text"] == "bye"
        seconds = await closed_after(wire, 1.0)
    record("close_after_connection_close_s", seconds)
    assert seconds < 1.0


async def test_idle_keep_alive_is_closed_after_the_keep_alive_timeout(server: Worker) -> None:
    async with open_wire(server.port) as wire:
        sent = trio.current_time()
        await wire.send(tool_call("echo", {"text": "stay"}, port=server.port))
        with trio.fail_after(5):
            reply = await wire.response()
        assert reply.status == 200
        assert "close" not in reply.headers.get("connection", "")
        seconds = await closed_after(wire, 3 * KEEP_ALIVE + MARGIN)
        since_request = trio.current_time() - sent
    record("close_after_idle_keep_alive_s", seconds)
    assert since_request >= KEEP_ALIVE  # the keep-alive timeout, not earlier
    assert seconds <= 3 * KEEP_ALIVE


async def test_http10_json_response_then_close(server: Worker) -> None:
    start = trio.current_time()
    async with open_wire(server.port) as wire:
        await wire.send(tool_call("echo", {"text": "old"}, port=server.port, version="1.0"))
        with trio.fail_after(5):
            reply = await wire.response()
        answered = trio.current_time() - start
        assert reply.status == 200
        assert reply.headers["content-type"].startswith("application/json")
        assert reply.messages[0]["result"]["content"][0]["text"] == "old"
        seconds = await closed_after(wire, 1.0)
    record("http10_json_answer_s", answered)
    record("http10_json_close_after_response_s", seconds)


async def test_http10_sse_response_then_close(server: Worker) -> None:
    start = trio.current_time()
    async with open_wire(server.port) as wire:
        request = tool_call(
            "steps", {}, port=server.port, version="1.0", meta={"progressToken": "p"}
        )
        await wire.send(request)
        with trio.fail_after(5):
            reply = await wire.response()  # close-delimited: ends when the server closes
        total = trio.current_time() - start
        assert reply.status == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        assert "content-length" not in reply.headers
        progress, final = reply.messages
        assert progress["method"] == "notifications/progress", progress
        assert progress["params"]["progressToken"] == "p"
        assert final["result"]["content"][0]["text"] == "done", final
        assert wire.eof  # the body's end was the server closing the socket
    record("http10_sse_answered_and_closed_s", total)
    assert total < 1.0


# ---------------------------------------------------------------------------- 4-6: slow reads


async def test_silent_client_is_closed(server: Worker) -> None:
    async with open_wire(server.port) as wire:
        seconds = await closed_after(wire, READ_TIMEOUT + MARGIN)
    record("close_silent_client_s", seconds)
    assert seconds <= READ_TIMEOUT + MARGIN


async def test_slowloris_headers_are_closed_within_read_timeout(server: Worker) -> None:
    async with open_wire(server.port) as wire, trio.open_nursery() as nursery:
        nursery.start_soon(dribble, wire, slow_headers(server.port), 0.5)
        seconds = await closed_after(wire, READ_TIMEOUT + MARGIN)
        nursery.cancel_scope.cancel()
    record("close_slowloris_headers_s", seconds)
    assert seconds <= READ_TIMEOUT + MARGIN


async def test_dribbled_body_gets_408_within_body_timeout(server: Worker) -> None:
    head, body = raw_request(
        "tools/call", {"name": "echo", "arguments": {"text": "slow"}}, port=server.port
    )
    async with open_wire(server.port) as wire, trio.open_nursery() as nursery:
        await wire.send(head)
        start = trio.current_time()
        nursery.start_soon(dribble, wire, (bytes([b]) for b in body), 0.5)
        with trio.fail_after(BODY_TIMEOUT + MARGIN):
            reply = await wire.response()
        answered = trio.current_time() - start
        seconds = await closed_after(wire, 1.0)
        nursery.cancel_scope.cancel()
    record("dribbled_body_408_after_s", answered)
    record("dribbled_body_close_after_408_s", seconds)
    assert reply.status == 408, reply
    [message] = reply.messages
    assert message["error"]["code"] == -32600, message
    assert BODY_TIMEOUT - 0.1 <= answered <= BODY_TIMEOUT + MARGIN


# ---------------------------------------------------------------------------- 7: non-readers


@asynccontextmanager
async def non_reader(port: int) -> AsyncIterator[Wire]:
    """A client that asks for ``BIG`` bytes and never reads them (a 4 KiB receive window)."""
    async with open_wire(port, rcvbuf=4096) as wire:
        await wire.send(tool_call("big", {"n": BIG}, port=port))
        yield wire


async def warm(worker: Worker) -> tuple[int, int]:
    """Serve one large result in full (allocator and lazy state warmed), then the baseline
    (fds, RSS kB)."""
    result, _ = await call(worker.port, "big", {"n": BIG})
    assert len(result["content"][0]["text"]) == BIG
    await call(worker.port, "echo", {"text": "warm"})
    return await quiet_fds(worker), worker.rss_kb()


async def test_non_reader_pins_nothing_once_gone(big_server: Worker) -> None:
    """While a non-reader is connected, others are served; once it goes away, the worker's
    fds and memory return to baseline."""
    fds, rss = await warm(big_server)
    async with non_reader(big_server.port):
        await trio.sleep(0.5)
        _, latency = await call(big_server.port, "echo", {"text": "others"})
        await trio.sleep(WRITE_TIMEOUT + 1.0)  # past write_timeout and --read-timeout
        held_fds, held_rss = big_server.fds(), big_server.rss_kb()
        _, latency_later = await call(big_server.port, "echo", {"text": "still"})
    released = await fds_settle(big_server, fds, 5)
    with trio.fail_after(5):
        while big_server.rss_kb() > rss + BIG // 1024:  # noqa: ASYNC110
            await trio.sleep(0.05)
    record("non_reader_baseline_fds", fds)
    record("non_reader_baseline_rss_kb", rss)
    record("non_reader_held_fds_after_write_timeout", held_fds)
    record("non_reader_held_rss_kb_after_write_timeout", held_rss)
    record("non_reader_other_client_latency_s", max(latency, latency_later))
    record("non_reader_fds_released_after_close_s", released)
    record("non_reader_after_close_fds", big_server.fds())
    record("non_reader_after_close_rss_kb", big_server.rss_kb())
    assert big_server.served.alive()


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="Linux socket option")
async def test_non_reader_is_dropped_within_write_timeout(cli_big_server: Worker) -> None:
    """hypercorn's trio worker shields its socket writes, so the app's write deadline cannot
    interrupt a send to a client that stopped reading; ``presa-trio serve`` puts the deadline
    on the listening socket as ``TCP_USER_TIMEOUT``, and the kernel aborts the connection."""
    big_server = cli_big_server
    fds, _ = await warm(big_server)
    async with non_reader(big_server.port) as wire:
        with trio.fail_after(5):  # accepted: the worker holds its connection
            while big_server.fds() <= fds:  # noqa: ASYNC110
                await trio.sleep(0.01)
        bound = WRITE_TIMEOUT + MARGIN + 1.0
        with trio.move_on_after(bound) as waited:
            await fds_settle(big_server, fds, bound)
        dropped = not waited.cancelled_caught
        record("non_reader_dropped_within_write_timeout", dropped)
        record("non_reader_fds_at_bound", big_server.fds())
        assert dropped, (
            f"the worker still holds the non-reader's connection {bound} s after its request "
            f"(fds {big_server.fds()} > baseline {fds}), write_timeout={WRITE_TIMEOUT}"
        )
        # Dropped: the client sees its answer cut short, never the whole of it.
        with trio.fail_after(5):
            status, _ = await wire.head()
            received = 0
            with pytest.raises(EOFError):
                while (data := await wire.piece()) is not None:
                    received += len(data)
        assert status == 200
        assert received < BIG


# ---------------------------------------------------------------------------- 8: listen bursts


async def test_tools_changed_burst_is_coalesced_and_the_stream_stays_open(server: Worker) -> None:
    async with open_wire(server.port) as wire:
        agreed = await open_listen(wire, server.port, {"toolsListChanged": True})
        assert agreed["notifications"] == {"toolsListChanged": True}
        deliveries = await structured(server.port, "announce", {"times": 100})
        received = []
        with trio.fail_after(2):
            received.append(await wire.message())
        with trio.move_on_after(0.2):  # whatever else the burst became
            while (message := await wire.message()) is not None:
                received.append(message)
        assert received
        assert all(m and m["method"] == "notifications/tools/list_changed" for m in received)
        assert await structured(server.port, "announce", {"times": 1}) == 1
        with trio.fail_after(2):
            later = await wire.message()
        assert later is not None
        assert later["method"] == "notifications/tools/list_changed", later
        assert await listeners(server.port) == 1
    with trio.fail_after(5):
        while await listeners(server.port) != 0:  # noqa: ASYNC110
            await trio.sleep(0.05)
    record("tools_burst_100_deliveries_counted", deliveries)
    record("tools_burst_100_notifications_received", len(received))


async def test_resource_update_bursts(server: Worker) -> None:
    async with open_wire(server.port) as wire:
        agreed = await open_listen(wire, server.port, {"resourceSubscriptions": ["test://r"]})
        assert agreed["notifications"] == {"resourceSubscriptions": ["test://r"]}
        # A burst the listener's buffer holds: every update arrives, the stream stays open.
        assert await structured(server.port, "touch_many", {"n": 200}) == 200
        uris = set()
        with trio.fail_after(3):
            for _ in range(200):
                message = await wire.message()
                assert message is not None
                assert message["method"] == "notifications/resources/updated", message
                uris.add(message["params"]["uri"])
        assert uris == {f"test://r/{i}" for i in range(200)}
        # A burst of 500 published at once: all of it, or an error that says events were lost.
        await structured(server.port, "touch_many", {"n": 500, "first": 1000})
        updates: list[str] = []
        final = None
        with trio.move_on_after(1.0):
            while (message := await wire.message()) is not None:
                if "id" in message:
                    final = message
                    break
                updates.append(message["params"]["uri"])
        assert len(set(updates)) == len(updates)
        if final is None:
            outcome = "all delivered, stream open"
            assert len(updates) == 500
        else:
            outcome = "cut off with -32603 after falling behind"
            assert "result" not in final, final  # never a clean end
            assert final["error"]["code"] == -32603, final
            assert final["error"]["message"] == FELL_BEHIND, final
            with trio.fail_after(2):
                assert await wire.message() is None  # the body ends after the error
    with trio.fail_after(5):
        while await listeners(server.port) != 0:  # noqa: ASYNC110
            await trio.sleep(0.05)
    record("resource_burst_200_received", len(uris))
    record("resource_burst_500_received_before_end", len(updates))
    record("resource_burst_500_outcome", outcome)


# ---------------------------------------------------------------------------- 9-11: crowds


async def idle_client(
    port: int,
    closes: list[tuple[float, float]],
    gate: trio.Semaphore,
    ready: trio.Event | None = None,
) -> None:
    """One request on a keep-alive connection, then idle; appends how long after sending its
    request and after reading its response the server closed it (the keep-alive clock
    starts in between). ``gate`` bounds how many connect at once: hypercorn listens with a
    backlog of 100, and a SYN beyond it is retried by the client's kernel a second later."""
    async with gate:
        stream = await connect(port)
        wire = Wire(stream)
        try:
            sent = trio.current_time()
            await wire.send(tool_call("echo", {"text": "idle"}, port=port))
            with trio.fail_after(10):
                reply = await wire.response()
        except BaseException:
            await stream.aclose()
            raise
    async with stream:
        assert reply.status == 200
        if ready is not None:
            ready.set()
        after_response = await closed_after(wire, 3 * KEEP_ALIVE + 2 * MARGIN)
        closes.append((trio.current_time() - sent, after_response))


async def test_200_idle_keep_alive_clients_are_closed(server: Worker) -> None:
    baseline = await quiet_fds(server)
    closes: list[tuple[float, float]] = []
    peak = 0
    gate = trio.Semaphore(50)
    async with trio.open_nursery() as nursery:
        for _ in range(200):
            nursery.start_soon(idle_client, server.port, closes, gate)
        with trio.fail_after(10):
            while len(closes) < 200:
                peak = max(peak, server.fds())
                await trio.sleep(0.05)
    settled = await fds_settle(server, baseline, 5)
    record("idle200_baseline_fds", baseline)
    record("idle200_peak_fds", peak)
    since_request = min(since for since, _ in closes)
    since_response = max(since for _, since in closes)
    record("idle200_close_min_since_request_s", since_request)
    record("idle200_close_max_since_response_s", since_response)
    record("idle200_fds_back_to_baseline_after_s", settled)
    record("idle200_after_fds", server.fds())
    assert peak >= baseline + 150  # they were held at the same time
    assert since_request >= KEEP_ALIVE  # the keep-alive timeout, not earlier
    assert since_response <= 3 * KEEP_ALIVE


async def test_idle_crowd_under_a_low_fd_limit(lowfd_server: Worker) -> None:
    worker = lowfd_server
    assert _limits(worker.pid) == ("256", "256")
    await call(worker.port, "echo", {"text": "warm"})
    baseline = await quiet_fds(worker)
    closes: list[tuple[float, float]] = []
    latencies: list[float] = []

    async def newcomer() -> None:  # keep-alive too: it holds its fd once answered
        start = trio.current_time()
        async with open_wire(worker.port) as wire:
            await wire.send(tool_call("echo", {"text": "new"}, port=worker.port))
            with trio.fail_after(3 * KEEP_ALIVE + 2 * MARGIN):
                reply = await wire.response()
            assert reply.status == 200
            latencies.append(trio.current_time() - start)
            await closed_after(wire, 3 * KEEP_ALIVE + 2 * MARGIN)

    gate = trio.Semaphore(50)
    async with trio.open_nursery() as nursery:
        ready = [trio.Event() for _ in range(200)]
        for event in ready:
            nursery.start_soon(idle_client, worker.port, closes, gate, event)
        with trio.fail_after(10):
            for event in ready:
                await event.wait()
        held = worker.fds()
        assert held >= baseline + 190  # the idle crowd is held at once: few fds are left
        for _ in range(80):  # more than the fds left: some wait for the idle ones to go
            nursery.start_soon(newcomer)
    emfile = worker.log_count("Too many open files")
    record("lowfd_baseline_fds", baseline)
    record("lowfd_fds_with_200_idle", held)
    record("lowfd_newcomers_served", len(latencies))
    record("lowfd_newcomer_latency_max_s", max(latencies))
    record("lowfd_newcomers_waiting_over_0.5s", sum(x > 0.5 for x in latencies))
    record("lowfd_idle_close_max_since_response_s", max(since for _, since in closes))
    record("lowfd_emfile_log_lines", emfile)
    lines = worker.served.log().splitlines()
    record("lowfd_emfile_lines_sample", sorted({x for x in lines if "Too many open files" in x}))
    assert worker.served.alive()
    assert len(latencies) == 80
    assert max(latencies) <= 3 * KEEP_ALIVE + 2 * MARGIN
    assert max(since for _, since in closes) <= 3 * KEEP_ALIVE
    assert emfile <= 60, worker.served.log()[-3000:]


def _limits(pid: int) -> tuple[str, str]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return soft, hard
    raise AssertionError("no fd limit")


async def test_normal_call_under_100_slowloris(server: Worker) -> None:
    baseline = await quiet_fds(server)
    closes: list[float] = []

    async def slowloris() -> None:
        async with open_wire(server.port) as wire, trio.open_nursery() as nursery:
            nursery.start_soon(dribble, wire, slow_headers(server.port), 0.5)
            closes.append(await closed_after(wire, READ_TIMEOUT + MARGIN))
            nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        for _ in range(100):
            nursery.start_soon(slowloris)
        with trio.fail_after(5):
            while server.fds() < baseline + 100:  # noqa: ASYNC110
                await trio.sleep(0.01)
        held = server.fds()
        with trio.fail_after(5):
            result, latency = await call(server.port, "echo", {"text": "through"})
        assert result["content"][0]["text"] == "through"
    record("slowloris100_held_fds", held - baseline)
    record("slowloris100_normal_call_latency_s", latency)
    record("slowloris100_close_max_s", max(closes))
    assert len(closes) == 100
    assert max(closes) <= READ_TIMEOUT + MARGIN


# ---------------------------------------------------------------------------- the CLI's flags


# ``presa-trio serve`` once set hypercorn's read timeout (30 s) by default, which closes any
# connection the client is silent on: every listen stream and every slower answer was cut.


async def test_cli_slow_tool_call_outlives_read_timeout(cli_server: Worker) -> None:
    seconds = READ_TIMEOUT + 1
    answer = None
    start = trio.current_time()
    async with open_wire(cli_server.port) as wire:
        await wire.send(tool_call("nap", {"seconds": seconds}, port=cli_server.port, extra=CLOSE))
        with trio.fail_after(seconds + MARGIN + 2):
            try:
                answer = await wire.response()
            except EOFError:
                record("cli_slow_call_cut_after_s", trio.current_time() - start)
    assert answer is not None, (
        f"a {seconds} s tool call under presa-trio serve's defaults got no answer: the "
        f"connection was closed after {trio.current_time() - start:.2f} s"
    )
    assert answer.messages[0]["result"]["content"][0]["text"] == f"rested {seconds}"


async def test_cli_listen_stream_outlives_read_timeout(cli_server: Worker) -> None:
    async with open_wire(cli_server.port) as wire:
        await open_listen(wire, cli_server.port, {"toolsListChanged": True})
        start = trio.current_time()
        cut_after = None
        with trio.move_on_after(READ_TIMEOUT + MARGIN):
            try:
                await wire.message()
            except EOFError:
                cut_after = trio.current_time() - start
        record("cli_listen_cut_after_s", cut_after)
        assert cut_after is None, (
            f"the listen stream was cut {cut_after:.2f} s after it opened, without a final "
            "result or error (a truncated chunked body)"
        )
        await structured(cli_server.port, "announce", {"times": 1})
        with trio.fail_after(2):
            change = await wire.message()
        assert change is not None
        assert change["method"] == "notifications/tools/list_changed"
