"""``presa-trio proxy --stdio -- CMD ARGS``: a stdio MCP server spawned behind this process,
every line recorded and checked as it passes.

Lines from this process's stdin go to the child's stdin, lines from the child's stdout to
this process's stdout, each byte for byte; the child's stderr is this process's. At end of
input the child's stdin is closed and it has ``STOP_GRACE`` seconds to exit (then SIGTERM,
then SIGKILL); when its stdout ends the proxy waits (bounded the same way) for its exit
status. What it does not do: reorder, rewrite or answer anything itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import trio

from .frames import LineSplitter
from .recorder import Passed, Recorder, parse_body, say

STOP_GRACE = 10.0  # seconds a child has to exit after its input ends, before SIGTERM
KILL_GRACE = 2.0  # seconds after SIGTERM before SIGKILL
MAX_LINE = 64 * 1024 * 1024  # bytes of one line held for checking; longer ones pass in pieces
READ_SIZE = 65536
NOT_STARTED = 127  # the exit status when CMD cannot be started, as a shell's


async def run_stdio(command: Sequence[str], recorder: Recorder) -> int:
    """Run the proxy until the child's output ends; the child's exit status (128 + N when
    signal N ended it)."""
    try:
        process = await trio.lowlevel.open_process(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
    except OSError as exc:
        say(f"cannot start {command[0]!r}: {exc.strerror or exc}")
        await trio.lowlevel.checkpoint()  # a failed spawn may not have yielded
        return NOT_STARTED
    assert process.stdin is not None and process.stdout is not None
    with ExitStack() as fds:
        stdin = fds.enter_context(_borrowed_fd(0))
        stdout = fds.enter_context(_borrowed_fd(1))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_on_signal, process)
            nursery.start_soon(_client_side, stdin, process, recorder)
            await _pump(process.stdout, stdout, "server", recorder)
            code = await _reaped(process, STOP_GRACE)
            nursery.cancel_scope.cancel()
        await stdin.aclose()
        await stdout.aclose()
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says


async def _client_side(stdin: trio.abc.ReceiveStream, process: trio.Process,
                       recorder: Recorder) -> None:  # fmt: skip
    """The client's lines to the child; at their end, the child's input closed and its exit
    awaited (bounded)."""
    assert process.stdin is not None
    try:
        await _pump(stdin, process.stdin, "client", recorder)
    finally:
        with trio.CancelScope(shield=True):
            await process.stdin.aclose()
    await _reaped(process, STOP_GRACE)


async def _pump(source: trio.abc.ReceiveStream, sink: trio.abc.SendStream, direction: str,
                recorder: Recorder) -> None:  # fmt: skip
    """Lines from ``source`` to ``sink`` unchanged, each recorded before it is passed on,
    until ``source`` ends or ``sink`` stops taking them."""
    lines = LineSplitter(MAX_LINE)
    while True:
        chunk = bytes(await source.receive_some(READ_SIZE))
        pieces = lines.feed(chunk) if chunk else lines.close()
        for line, whole in pieces:
            if whole:
                message, text = parse_body(line)
                await recorder.record(Passed(direction, message, text))
            else:
                say(f"a {direction} line over {MAX_LINE} bytes passes unchecked")
            try:
                await sink.send_all(line)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
        if not chunk:
            return


async def _reaped(process: trio.Process, grace: float) -> int:
    """``process``'s exit status, after ``grace`` seconds, SIGTERM, then SIGKILL at worst."""
    with trio.move_on_after(grace):
        return await process.wait()
    process.terminate()
    with trio.move_on_after(KILL_GRACE):
        return await process.wait()
    process.kill()
    return await process.wait()


async def _on_signal(process: trio.Process) -> None:
    """SIGINT or SIGTERM to the proxy stops the child the same way; its exit ends the run."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            if process.returncode is None:
                process.send_signal(signum)


@contextmanager
def _borrowed_fd(fd: int) -> Iterator[trio.lowlevel.FdStream]:
    """An ``FdStream`` on a duplicate of ``fd``, whose blocking mode is put back on exit (the
    flag is shared with the shell's open file)."""
    blocking = os.get_blocking(fd)
    try:
        yield trio.lowlevel.FdStream(os.dup(fd))
    finally:
        os.set_blocking(fd, blocking)
