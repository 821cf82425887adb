"""Machine instructions per tools/call over HTTP: each app under hypercorn's trio worker,
counted by valgrind's callgrind while a client sends it requests on 16 connections.

What ``http_bench.py``'s CPU per request measures, counted rather than timed: exact for the
same binaries whatever else the machine does, so a change of a few percent in the server's
work shows, which the timed ratios (a spread of about 10 points) cannot. It counts work, not
its cost: an instruction that misses the caches counts once. The client runs natively; only
the server runs under valgrind, each app twice, ``--requests`` apart, and the difference is
the requests alone (start-up, the warm-up and shutdown cancel out).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import callgrind
from bench.http_bench import APPS, PROTO, ROOT, request_body

TOOL = "test_simple_text"
WARM_UP = 200  # requests before the counted ones, in both runs


def request_bytes(port: int) -> bytes:
    body = request_body(TOOL).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTO}\r\n"
        f"Mcp-Method: tools/call\r\nMcp-Name: {TOOL}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def one_answer(stream: trio.SocketStream, buffered: bytearray) -> bytes:
    """Read one HTTP/1.1 response with a Content-Length; return its body."""
    while b"\r\n\r\n" not in buffered:
        buffered += await stream.receive_some(65536)
    head, _, _ = bytes(buffered).partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")[1:]
        if line.lower().startswith(b"content-length:")
    )
    end = len(head) + 4 + length
    while len(buffered) < end:
        buffered += await stream.receive_some(65536)
    body = bytes(buffered[len(head) + 4 : end])
    del buffered[:end]
    if not head.startswith(b"HTTP/1.1 200") or b'"result"' not in body:
        raise RuntimeError(f"bad response: {head!r} {body[:200]!r}")
    return body


async def send_requests(port: int, total: int, connections: int) -> None:
    """``total`` requests, closed loop, on ``connections`` keep-alive connections."""
    request = request_bytes(port)
    left = total

    async def connection() -> None:
        nonlocal left
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        buffered = bytearray()
        async with stream:
            while left > 0:
                left -= 1
                await stream.send_all(request)
                await one_answer(stream, buffered)

    async with trio.open_nursery() as nursery:
        for _ in range(connections):
            nursery.start_soon(connection)


async def wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Until ``port`` accepts (under valgrind, Python takes a minute to start)."""
    with trio.fail_after(300):
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited ({proc.returncode}) before listening")
            try:
                await (await trio.open_tcp_stream("127.0.0.1", port)).aclose()
                return
            except OSError:
                await trio.sleep(0.2)


def ephemeral_port() -> int:
    """A port the system has free now (not a fixed range: two runs at once must not meet)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def serve(label: str, port: int) -> None:
    """The server side (hidden ``--serve`` mode): hypercorn's trio worker serving ``label``
    on 127.0.0.1 until SIGUSR1."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    module, name = APPS[label][0].split(":")
    app = getattr(importlib.import_module(module), name)
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]

    async def until_usr1() -> None:
        with trio.open_signal_receiver(signal.SIGUSR1) as signals:
            async for _ in signals:
                return

    trio.run(functools.partial(hypercorn_serve, app, config, shutdown_trigger=until_usr1))


def count(label: str, requests: int, connections: int, valgrind: bool) -> int | None:
    """Serve ``label`` (under callgrind, if ``valgrind``), send it ``requests``, stop it;
    return the instructions callgrind counted."""
    port = ephemeral_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), **APPS[label][1]}
    command = [sys.executable, __file__, "--serve", label, "--port", str(port)]
    if valgrind:
        command = [*callgrind.PREFIX, *command]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        trio.run(wait_listening, port, proc)
        trio.run(send_requests, port, requests, connections)
        proc.send_signal(signal.SIGUSR1)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"{label}: the server exited {proc.returncode}:\n{stderr.decode()}")
    if not valgrind:
        return None
    return callgrind.collected(stderr.decode())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1000, help="counted requests (default 1000)")
    ap.add_argument("--connections", type=int, default=16, help="client connections (default 16)")
    ap.add_argument(
        "--apps", default=",".join(APPS), help="comma-separated, of: " + ", ".join(APPS)
    )
    ap.add_argument("--no-valgrind", action="store_true", help="serve natively, count nothing")
    ap.add_argument("--serve", metavar="APP", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return 0
    labels = [label for label in args.apps.split(",") if label]
    unknown = [label for label in labels if label not in APPS]
    if unknown:
        ap.error(f"unknown app(s): {', '.join(unknown)}")
    valgrind = not args.no_valgrind
    if valgrind and not callgrind.available():
        print(f"http_work: {callgrind.MISSING}")
        return 2
    print(
        f"Machine instructions per tools/call over HTTP (hypercorn trio worker, callgrind;"
        f" {args.requests:,} requests on {args.connections} connections)"
    )
    per: dict[str, float] = {}
    for label in labels:
        started = time.monotonic()
        counts = [count(label, WARM_UP + extra, args.connections, valgrind)
                  for extra in (0, args.requests)]  # fmt: skip
        if counts[0] is None or counts[1] is None:
            print(f"{label:<15}{'served':>11}  ({time.monotonic() - started:.0f} s)", flush=True)
            continue
        per[label] = (counts[1] - counts[0]) / args.requests
        print(f"{label:<15}{per[label]:>11,.0f}  ({time.monotonic() - started:.0f} s)", flush=True)
    if "raw" in per:
        for label, value in per.items():
            if label != "raw":
                extra = value - per["raw"]
                print(f"{label} / raw: {value / per['raw']:.3f}x ({extra:,.0f} more per request)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
