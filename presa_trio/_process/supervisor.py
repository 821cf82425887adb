"""``presa-trio serve --workers N``: several worker processes on one listening socket, kept
running by a supervisor that owns the process.

Each worker is the same single-process trio worker ``presa-trio serve`` runs (write deadline,
``TCP_USER_TIMEOUT``, bounded shutdown, final results on listen streams at SIGTERM), started
with the listening socket the supervisor bound and a pipe whose far end only the supervisor
holds. The supervisor speaks no protocol and runs no app: it starts workers, restarts one that
dies (and says why it died), forwards SIGTERM/SIGINT to every worker and waits for them within
the shutdown bound, and gives up, with a non-zero status, on a worker that keeps dying as it
starts. A worker whose supervisor is gone (killed with SIGKILL, say) sees the pipe close and
stops as if it had been sent SIGTERM, so no worker outlives its supervisor for long.

Workers run in sessions of their own: a terminal's Ctrl-C reaches the supervisor alone, which
stops the workers once, in order. What a lost worker leaves behind (its tasks) is failed by the
surviving workers through the shared store's lease, as for any lost worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Sequence
from typing import final

import trio

logger = logging.getLogger("presa_trio.supervisor")

#: A worker that dies within this many seconds of its start failed to start.
STARTUP_GRACE = 10.0
#: After this many failed starts in a row of one worker, the supervisor gives up.
MAX_FAILED_STARTS = 5
#: Pauses before restarting a worker, by how many starts in a row failed before (the last
#: one repeats): a worker that dies once is back at once, one that keeps dying is not spun.
RESTART_PAUSES = (0.0, 0.5, 1.0, 2.0, 5.0)
#: What a worker gets past its own shutdown bound before the supervisor kills it.
KILL_GRACE = 2.0
#: The supervisor's exit status when it gave up on a worker.
GAVE_UP = 1
#: ... and when a worker did not stop cleanly (EX_SOFTWARE, as a worker's own bound).
UNCLEAN = 70


def describe(returncode: int) -> str:
    """How a process ended, in words: ``killed by SIGKILL``, ``exited with status 1``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with status {returncode}"


@final
class Supervisor:
    """Keeps ``workers`` copies of the command ``argv`` running until told to stop.

    ``pass_fds`` are the descriptors each worker inherits (the listening socket and the read
    end of the supervisor's pipe). ``shutdown_timeout`` is the workers' own bound: at SIGTERM
    every worker is asked to stop, and one still running ``KILL_GRACE`` seconds past that
    bound is killed.
    """

    def __init__(
        self,
        argv: Sequence[str],
        workers: int,
        *,
        pass_fds: Sequence[int] = (),
        shutdown_timeout: float = 10.0,
        startup_grace: float = STARTUP_GRACE,
        max_failed_starts: int = MAX_FAILED_STARTS,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.argv = list(argv)
        self.workers = workers
        self.pass_fds = tuple(pass_fds)
        self.shutdown_timeout = shutdown_timeout
        self.startup_grace = startup_grace
        self.max_failed_starts = max_failed_starts
        self._running: dict[int, trio.Process] = {}
        self._stopping = trio.Event()
        self._gave_up = False
        self._unclean = False

    @property
    def pids(self) -> dict[int, int]:
        """Worker number -> pid of the workers running now."""
        return {slot: process.pid for slot, process in self._running.items()}

    async def run(self) -> int:
        """Supervise until SIGTERM/SIGINT (or giving up); the exit status: 0 when every worker
        stopped cleanly, ``GAVE_UP`` or ``UNCLEAN`` otherwise."""
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._until_signal, signals)
                async with trio.open_nursery() as slots:
                    for slot in range(self.workers):
                        slots.start_soon(self._keep_running, slot, name=f"worker {slot}")
                # every worker has stopped: the supervisor was told to, or gave up
                nursery.cancel_scope.cancel()
        if self._gave_up:
            return GAVE_UP
        return UNCLEAN if self._unclean else 0

    async def _until_signal(self, signals: AsyncIterator[int]) -> None:
        async for signum in signals:
            logger.warning(
                "%s: stopping %d worker(s) within %g s",
                signal.Signals(signum).name,
                len(self._running),
                self.shutdown_timeout,
            )
            self.stop()

    def stop(self) -> None:
        """Ask every worker to stop (SIGTERM), once; they get their shutdown bound."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        for process in self._running.values():
            _signal(process, signal.SIGTERM)

    async def _keep_running(self, slot: int) -> None:
        """Run worker ``slot`` again and again until the supervisor stops."""
        await trio.lowlevel.checkpoint()
        failed_starts = 0
        while not self._stopping.is_set():
            try:
                process = await trio.lowlevel.open_process(
                    self.argv, pass_fds=self.pass_fds, start_new_session=True
                )
            except OSError as exc:
                logger.error("worker %d could not be started: %s", slot, exc)
                self._give_up()
                return
            started = trio.current_time()
            self._running[slot] = process
            if self._stopping.is_set():  # a signal came as it started: it stops too
                _signal(process, signal.SIGTERM)
            try:
                returncode = await self._wait(process)
            finally:
                del self._running[slot]
            how = describe(returncode)
            if self._stopping.is_set():
                if returncode != 0:
                    self._unclean = True
                    logger.warning("worker %d (pid %d) %s while stopping", slot, process.pid, how)
                return
            if trio.current_time() - started < self.startup_grace:
                failed_starts += 1
            else:
                failed_starts = 0
            if failed_starts >= self.max_failed_starts:
                logger.error(
                    "worker %d (pid %d) %s; it died within %g s of starting %d times in a "
                    "row: giving up",
                    slot,
                    process.pid,
                    how,
                    self.startup_grace,
                    failed_starts,
                )
                self._give_up()
                return
            pause = RESTART_PAUSES[min(failed_starts, len(RESTART_PAUSES) - 1)]
            logger.error(
                "worker %d (pid %d) %s; starting a new one%s",
                slot,
                process.pid,
                how,
                f" in {pause:g} s" if pause else "",
            )
            with trio.move_on_after(pause):
                await self._stopping.wait()

    async def _wait(self, process: trio.Process) -> int:
        """The worker's exit status. Once the supervisor stops, the worker has its shutdown
        bound and ``KILL_GRACE`` more; then it is killed. If the supervisor itself is
        cancelled, the worker is killed at once: no worker outlives its owner."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._kill_when_overdue, process)
                returncode = await process.wait()
                nursery.cancel_scope.cancel()
            return returncode
        finally:
            if process.returncode is None:
                process.kill()
                with trio.CancelScope(shield=True), trio.move_on_after(KILL_GRACE):
                    await process.wait()

    async def _kill_when_overdue(self, process: trio.Process) -> None:
        await self._stopping.wait()
        await trio.sleep(self.shutdown_timeout + KILL_GRACE)
        logger.error(
            "worker pid %d did not stop within %g s; killing it",
            process.pid,
            self.shutdown_timeout + KILL_GRACE,
        )
        self._unclean = True
        process.kill()

    def _give_up(self) -> None:
        self._gave_up = True
        self.stop()


def _signal(process: trio.Process, signum: int) -> None:
    """Send ``signum`` to a worker that may have exited already."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):  # it exited since the check
            process.send_signal(signum)


async def until_orphaned(fd: int) -> None:
    """Return once the supervisor that started this worker is gone: the far end of the pipe
    ``fd`` reads from is held by the supervisor alone and never written, so the pipe becomes
    readable only when the supervisor's end closes (at its exit, however it ended)."""
    while True:
        await trio.lowlevel.wait_readable(fd)
        if not os.read(fd, 512):
            return
