"""A queue of database calls that one task hands to threads in batches (the writer and the
reader of SQLite and PostgreSQL): one thread hop for all that is queued when it looks, and
at most ``lanes`` batches in flight at once, each in a lane (a thread, and a connection of
its own where the database keeps one a lane).

The trio side only: what a batch does with its calls (one transaction, or one read after
another) is the ``run`` given, called in a worker thread. It knows nothing of SQL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar, final

import outcome
import trio

from .._boundary import error_boundary
from .sql import Connection, StorageUnavailable

T = TypeVar("T")

BATCH_MAX = 64  # calls one thread hop runs at most
QUEUE_SIZE = 256  # calls waiting at most (a caller then waits to queue)


@final
class Job:
    """One call handed to a batch: ``fn``, and its ``result`` once run. ``taken`` once a
    batch has it (from then on it runs to its end); ``withdrawn`` by a caller cancelled
    before that (no batch runs it)."""

    __slots__ = ("done", "fn", "result", "taken", "withdrawn")

    def __init__(self, fn: Callable[[Connection], Any]) -> None:
        self.fn = fn
        self.result: outcome.Outcome[Any] | None = None
        self.done = trio.Event()
        self.taken = False
        self.withdrawn = False


@final
class Batcher:
    """Calls queued by many tasks, run by one (``serve``) in batches in worker threads.

    ``run(jobs, lane)`` runs in a thread and sets each job's ``result``; two batches never
    run in the same lane (0 to ``lanes`` - 1) at once. ``before`` (on the event loop,
    optional) is told of each batch, for counting. While ``serve`` does not run, ``hand``
    returns None and the caller runs its call itself.
    """

    __slots__ = ("_before", "_lanes", "_log", "_name", "_run", "_send")

    def __init__(
        self,
        name: str,
        run: Callable[[list[Job], int], None],
        log: logging.Logger,
        before: Callable[[], None] | None = None,
        *,
        lanes: int = 1,
    ) -> None:
        self._name = name
        self._run = run
        self._log = log
        self._before = before
        self._lanes = lanes
        self._send: trio.MemorySendChannel[Job] | None = None

    @property
    def serving(self) -> bool:
        return self._send is not None

    async def hand(self, fn: Callable[[Connection], T]) -> outcome.Outcome[T] | None:
        """Queue ``fn`` and wait for its outcome (None: nothing serves the queue, the
        caller runs it itself). Cancelled while queued, the call is withdrawn and never
        runs; once a batch has it, it runs to its end and the caller waits for that, as
        for a thread of its own (a worker thread cannot be interrupted)."""
        send = self._send
        job = Job(fn)
        try:
            if send is None:
                raise trio.ClosedResourceError
            await send.send(job)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await trio.lowlevel.checkpoint()
            return None
        try:
            await job.done.wait()
        except trio.Cancelled:
            if not job.taken:
                job.withdrawn = True
                raise
            with trio.CancelScope(shield=True):
                await job.done.wait()
            raise
        assert job.result is not None
        return job.result

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the queued calls until cancelled: once a lane is free, whatever is queued
        (at most ``BATCH_MAX``) goes to a thread in one hop. When it stops, the batches in
        flight end first, what is still queued is answered ``StorageUnavailable``, and
        later calls run on their own again."""
        send, receive = trio.open_memory_channel[Job](QUEUE_SIZE)
        give_back, free = trio.open_memory_channel[int](self._lanes)
        for lane in range(self._lanes):
            give_back.send_nowait(lane)
        self._send = send
        try:
            async with trio.open_nursery() as flying:
                task_status.started()
                while True:
                    lane = await free.receive()
                    batch = [await receive.receive()]
                    while len(batch) < BATCH_MAX:
                        try:
                            batch.append(receive.receive_nowait())
                        except trio.WouldBlock:
                            break
                    taken = [job for job in batch if not job.withdrawn]
                    for job in taken:
                        job.taken = True
                    if taken:
                        flying.start_soon(self._in_lane, taken, lane, give_back)
                    else:
                        give_back.send_nowait(lane)
        finally:
            self._send = None
            send.close()
            for job in _drained(receive):
                job.result = outcome.Error(StorageUnavailable("the store is closing"))
                job.done.set()
            receive.close()

    async def _in_lane(
        self, batch: list[Job], lane: int, give_back: trio.MemorySendChannel[int]
    ) -> None:
        """``batch`` in a thread, in ``lane``, which is free again once it is done. Every
        job is answered whatever happens; a bug in a batch is logged, and the others run."""
        try:
            with error_boundary(self._name, self._log):
                if self._before is not None:
                    self._before()
                await trio.to_thread.run_sync(self._run, batch, lane)
        finally:
            for job in batch:
                if job.result is None:  # the thread itself failed (a bug: logged above)
                    job.result = outcome.Error(StorageUnavailable())
                job.done.set()
            give_back.send_nowait(lane)


def _drained(receive: trio.MemoryReceiveChannel[Job]) -> list[Job]:
    """What is still queued in ``receive`` (closed or not), taken out."""
    left = []
    while True:
        try:
            left.append(receive.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return left
