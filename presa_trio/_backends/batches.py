"""A queue of database calls that one task hands to its thread in batches (SQLite's writer
and reader): one thread hop for all that is queued when it looks.

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
    """Calls queued by many tasks, run by one (``serve``) in batches in a worker thread.

    ``run(jobs)`` runs in that thread and sets each job's ``result``; ``before`` (on the
    event loop, optional) is told of each batch, for counting. While ``serve`` does not run,
    ``hand`` returns None and the caller runs its call itself.
    """

    __slots__ = ("_before", "_log", "_name", "_run", "_send")

    def __init__(
        self,
        name: str,
        run: Callable[[list[Job]], None],
        log: logging.Logger,
        before: Callable[[], None] | None = None,
    ) -> None:
        self._name = name
        self._run = run
        self._log = log
        self._before = before
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
        """Run the queued calls until cancelled: whatever is queued when it looks (at most
        ``BATCH_MAX``) goes to the thread in one hop. When it stops, what is still queued
        is answered ``StorageUnavailable``, and later calls run on their own again."""
        send, receive = trio.open_memory_channel[Job](QUEUE_SIZE)
        self._send = send
        try:
            task_status.started()
            while True:
                batch = [await receive.receive()]
                while len(batch) < BATCH_MAX:
                    try:
                        batch.append(receive.receive_nowait())
                    except trio.WouldBlock:
                        break
                taken = [job for job in batch if not job.withdrawn]
                if taken:
                    # every job is answered whatever happens; a bug in a batch is logged,
                    # and the next batch runs
                    with error_boundary(self._name, self._log):
                        await self._run_batch(taken)
        finally:
            self._send = None
            send.close()
            for job in _drained(receive):
                job.result = outcome.Error(StorageUnavailable("the store is closing"))
                job.done.set()
            receive.close()

    async def _run_batch(self, batch: list[Job]) -> None:
        for job in batch:
            job.taken = True
        try:
            if self._before is not None:
                self._before()
            await trio.to_thread.run_sync(self._run, batch)
        finally:
            for job in batch:
                if job.result is None:  # the thread itself failed (a bug: logged above)
                    job.result = outcome.Error(StorageUnavailable())
                job.done.set()


def _drained(receive: trio.MemoryReceiveChannel[Job]) -> list[Job]:
    """What is still queued in ``receive`` (closed or not), taken out."""
    left = []
    while True:
        try:
            left.append(receive.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return left
