"""The task runner: the life of the tasks this worker runs (SEP-2663 §5), from launch to
the record of how each ended.

One runner nursery, owned by the run's tasks service, holds every task. Each task is a
nursery of its own, whose cancel scope's deadline is the task's TTL; ``tasks/cancel``
cancels that scope. The task's entry (``_Live``) is made when it is launched, before its
record is stored: a ``tasks/cancel`` that arrives before the task first runs is noted there,
and the task cancels its scope as it starts, so its work stops at its first checkpoint;
whatever the work does after a cancel (a late result, say) is recorded as ``cancelled``. A
tool that
needs input parks on a memory channel, one for each round of questions; ``tasks/update``
delivers each answer into it with its key. Every task runs behind an error boundary:
nothing a tool does, and no store failure, reaches the runner nursery or another task.

What it does not do: reach a task another worker runs (``_forwarding``), or look for the
tasks of a lost worker (``_reapers``, which fails them through ``commit``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    ExitStack,
    asynccontextmanager,
)
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, NoReturn, final

import trio

from ...backends import Backend
from ...errors import InternalError, ServiceUnavailable
from ...extensions import SpanHandle, Tracing, error_boundary, protocol_error
from ._states import (
    CancelRequested,
    Completed,
    Expired,
    Failed,
    InputRequested,
    InputsAccepted,
    InputsWithdrawn,
    Stopped,
    TaskEvent,
    TaskRecord,
    apply,
)
from ._store import InstantStore, TaskLimits, TaskStore

logger = logging.getLogger("presa_trio.tasks")

Work = Callable[["TaskHandle"], Awaitable[Mapping[str, Any]]]
_Send = trio.MemorySendChannel[tuple[str, Any]]  # where an answer goes, with its key
#: Work that needs no handle (a tool call: the tool reaches its task through its context).
Call = Callable[[], Awaitable[Mapping[str, Any]]]
Publish = Callable[[TaskRecord], None]
Provider = Callable[[Any, Mapping[str, Mapping[str, Any]]], Awaitable[dict[str, Any]]]

CANCEL_WAIT_SECONDS = 5.0  # how long tasks/cancel waits for the tool's cleanup before acking
COMMIT_SECONDS = 5.0  # bound on every shielded store call (recording an outcome: all attempts)
COMMIT_RETRY_SECONDS = (0.05, 0.25, 1.0)  # pauses between attempts when the store fails
RESETTLE_SECONDS = 5.0  # how often outcomes the store refused are offered to it again
SHARED_KEYS_MAX = 8  # the largest set of asked keys the tasks of a run share ...
SHARED_KEY_SETS = 256  # ... and how many such sets (past it the oldest is forgotten)
_NO_ANSWERS: Mapping[str, Any] = MappingProxyType({})  # what most tasks start with
_STOPPED = Stopped()  # what stands for a task whose runner is cancelled
#: Each task's trio name, the one trio would give it, one string for all (trio would make one
#: for each task, which a parked task would keep).
_TASK_NAME = f"{__name__}.TaskRunner._run"
#: How a task ends whose work was cancelled in its nursery, but by neither a client nor the
#: TTL (the work cancelled its own nursery).
_WORK_CANCELLED = Failed(InternalError("Task work was cancelled before it finished").to_error())
#: What a record the store may have kept from a creation that timed out is failed with.
_NOT_STARTED = Failed(InternalError("The server could not start this task").to_error())


@dataclass(eq=False, slots=True)
class _Live:
    """The trio side of one task; never stored. It exists before the task's record does.

    ``nursery`` is the task's nursery once the task runs (None until then); its cancel
    scope's deadline is the TTL, and ``tasks/cancel`` cancels that scope (``cancel``: at once
    if the task runs, as it starts if it has not run yet). ``cancelled`` says a client asked,
    and nothing else sets it: how a cancelled task is told from an expired one (or from work
    that cancelled its own nursery). ``done`` is made by the first ``tasks/cancel`` that
    waits for the task's end: most tasks never need one. ``written`` is the record as this
    runner last stored it, where ``commit`` starts from: the one copy of it a running task
    keeps.
    """

    answered: Mapping[str, Any]  # answers the creating request already carried (T§6.2)
    deadline: float  # the TTL, on trio's clock
    written: TaskRecord
    nursery: trio.Nursery | None = None
    cancelled: bool = False
    # (key, channel) of each question parked: a tuple (a dict would be 184 B at its least)
    parked: tuple[tuple[str, _Send], ...] = ()
    done: trio.Event | None = None

    @property
    def expired(self) -> bool:
        """The TTL ended the task (its nursery also cancels itself when a child fails, and a
        client's cancel is ``cancelled``)."""
        caught = self.nursery is not None and self.nursery.cancel_scope.cancelled_caught
        return caught and trio.current_time() >= self.deadline

    def park(self, keys: Iterable[str], send: _Send) -> None:
        """The questions ``keys`` wait on ``send`` (their round's channel)."""
        self.parked += tuple([(key, send) for key in keys])

    def claim(self, keys: Iterable[str]) -> dict[str, _Send]:
        """Take the channels of those of ``keys`` that are parked: a key is claimed once."""
        wanted = set(keys)
        claimed = {key: send for key, send in self.parked if key in wanted}
        if claimed:
            self.parked = tuple([pair for pair in self.parked if pair[0] not in claimed])
        return claimed

    def release(self) -> None:
        """Close every channel still parked (the task ends), and forget them."""
        for _, send in self.parked:
            send.close()
        self.parked = ()

    def cancel(self) -> None:
        """A client's ``tasks/cancel``: the task's scope is cancelled now if the task runs,
        and as it starts if it has not run yet."""
        self.cancelled = True
        if self.nursery is not None:
            self.nursery.cancel_scope.cancel()


@final
class TaskHandle:
    """What a running task's work sees: its id, its own nursery, and a way to park on input.

    ``nursery`` is the task's nursery: children started there belong to the task, are
    cancelled with it, and an error in one fails it.
    """

    __slots__ = ("_runner", "nursery", "task_id")

    def __init__(self, runner: TaskRunner, task_id: str, nursery: trio.Nursery) -> None:
        self._runner = runner
        self.task_id = task_id
        self.nursery = nursery

    async def provide(self, ctx: Any, requests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """``Context.input`` inside this task: park until every request has an answer."""
        return await self._runner.provider(self.task_id)(ctx, requests)


@final
class _TaskInput:
    """``Context.input`` inside one task. A parked task's detached context holds this small
    object, and its call is the parked wait's one frame."""

    __slots__ = ("_runner", "_task_id")

    def __init__(self, runner: TaskRunner, task_id: str) -> None:
        self._runner = runner
        self._task_id = task_id

    async def __call__(self, ctx: Any, requests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """Park until every request has an answer.

        The task shows the pending requests as ``inputRequests`` until ``tasks/update``
        delivers into their channels. A wait that ends without all its answers while the
        task goes on (the tool's own ``move_on_after`` around ``ctx.input``, say) withdraws
        the keys still unanswered: the record stops showing them, and an answer to them is
        ignored (SEP-2663 "superseded").
        """
        live = self._runner._live[self._task_id]  # only the task's own work asks, while it runs
        missing = _missing(requests, live.answered)
        if not missing:
            await trio.lowlevel.checkpoint()
            return _answered(requests, live.answered)
        # One channel for the round, whatever its number of keys: each answer comes with its
        # key, and room for all of them. What the wait holds is made when it needs it: the
        # answers' dict with the first answer.
        send, receive = trio.open_memory_channel[tuple[str, Any]](len(missing))
        live.park(missing, send)
        del send  # (the parked keys hold it)
        asked = False
        found: dict[str, Any] | None = None
        try:
            keys = self._runner.shared_keys(frozenset(missing))
            await self._runner.commit(self._task_id, InputRequested(missing, keys))
            del keys
            asked = True
            left = len(missing)  # (a count: an iterator over the keys would be held too)
            while left:
                key, answer = await receive.receive()
                if found is None:
                    found = _answered(requests, live.answered)
                found[key] = answer
                left -= 1
        finally:
            receive.close()
            # What is still parked was not answered (an answer claims its key first)
            unanswered = frozenset(live.claim(missing))
            if asked and unanswered and live.nursery is not None:
                live.nursery.start_soon(self._runner._withdraw, self._task_id, unanswered)
        assert found is not None  # (missing is not empty: one answer at least)
        return found


def _missing(
    requests: Mapping[str, Mapping[str, Any]], answered: Mapping[str, Any]
) -> Mapping[str, Mapping[str, Any]]:
    """The requests of a round that the creating request did not answer: most rounds ask
    all theirs, and then the round keeps the tool's own dict, not a copy (the task's record
    shows it until the round ends, and the tool waits for it meanwhile)."""
    if not answered and type(requests) is dict:
        return requests
    return {key: request for key, request in requests.items() if key not in answered}


def _answered(requests: Mapping[str, Any], answered: Mapping[str, Any]) -> dict[str, Any]:
    """The answers to ``requests`` that the creating request already carried."""
    return {key: answered[key] for key in requests if key in answered}


@asynccontextmanager
async def _around(
    attention: AbstractContextManager[object] | None, span: SpanHandle | None
) -> AsyncIterator[trio.Nursery]:
    """A task's nursery inside the backend's ``attention`` and its span made current (each
    when given)."""
    with ExitStack() as stack:
        if attention is not None:
            stack.enter_context(attention)
        if span is not None:
            stack.enter_context(span.current())
        async with trio.open_nursery() as nursery:
            yield nursery


@final
class TaskRunner:
    """Runs task work in its own nursery; commits every state change through the store."""

    def __init__(
        self,
        store: TaskStore,
        now_ms: Callable[[], int],
        publish: Publish | None = None,
        backend: Backend | None = None,
        tracing: Tracing | None = None,
        check: Callable[[Mapping[str, Any]], int | None] | None = None,
    ) -> None:
        self.store = store
        # A store in memory: creations need no shield or bound, outcomes no deadline.
        self._instant = isinstance(store, InstantStore)
        # Sees each result the work returns before it is recorded; raising fails the task.
        # What it returns is the result's size as JSON, when it measured it (or None).
        self.check = check
        self.tracing = tracing  # None: no task spans
        self.now_ms = now_ms
        self.publish = publish
        # Whose tasks this runner's are; on a shared backend, a task running here holds
        # its ``attention`` (so asks from other workers reach it promptly).
        self.backend = backend
        self.worker_id = backend.worker_id if backend is not None else ""
        self._shared = backend is not None and backend.shared
        self._nursery: trio.Nursery | None = None
        self._live: dict[str, _Live] = {}
        # Outcomes of finished tasks that the store refused to record: offered again until
        # it takes them (or the record is gone), so no task stays "working" for good.
        self._unsettled: dict[str, TaskEvent] = {}
        # One copy of each small set of keys its tasks ask (``shared_keys``).
        self._asked: dict[frozenset[str], frozenset[str]] = {}

    @property
    def nursery(self) -> trio.Nursery:
        if self._nursery is None:
            raise RuntimeError("the task runner is not running")
        return self._nursery

    @property
    def live_count(self) -> int:
        return len(self._live)

    def parked_count(self) -> int:
        """How many questions wait for an answer, over all tasks (0 when nothing waits)."""
        return sum(len(live.parked) for live in self._live.values())

    def runs(self, task_id: str) -> bool:
        """Whether the task runs here (launched by this runner, not ended yet)."""
        return task_id in self._live

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the runner nursery until cancelled; every task is a child of it."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                while True:
                    await trio.sleep(RESETTLE_SECONDS)
                    await self._resettle()
            finally:
                self._nursery = None

    @property
    def unsettled_count(self) -> int:
        """Finished tasks whose outcome the store has not taken yet."""
        return len(self._unsettled)

    async def _resettle(self) -> None:
        await trio.lowlevel.checkpoint()
        for task_id, outcome in list(self._unsettled.items()):
            try:
                recorded = await self._commit_within_bound(task_id, outcome, shield=False)
            except Exception:
                return  # the store still fails, or does not answer in time: next time
            self._unsettled.pop(task_id, None)
            if recorded is not None:  # (None: no such record, as after most timeouts)
                logger.info("the outcome of task %s is recorded at last", task_id)

    async def _commit_within_bound(
        self, task_id: str, event: TaskEvent, *, shield: bool = True
    ) -> TaskRecord | None:
        """``commit``, shielded (unless told) and bounded; ``ServiceUnavailable`` when the
        store does not answer in time."""
        with trio.move_on_after(COMMIT_SECONDS, shield=shield):
            return await self.commit(task_id, event)
        raise ServiceUnavailable("The task store did not answer in time; retry")

    async def launch(
        self,
        record: TaskRecord,
        work: Work | Call,
        limits: TaskLimits,
        answered: Mapping[str, Any] | None = None,
        *,
        handle: bool = True,
    ) -> None:
        """Store ``record`` and start ``work`` for it, or raise and store nothing.

        ``work`` is given the task's ``TaskHandle``; with ``handle=False`` it is called with
        nothing (``Call``), and no handle is made.

        The task is registered (``_Live``) before the record is stored: a ``tasks/cancel``
        that finds the record finds the task. Once the store has it, the
        task is spawned into the runner nursery with no checkpoint in between. Storing and
        spawning happen under a shield, together: a creating request cancelled half-way (its
        client went away) can neither leave a record with no work behind it nor work with
        no record. A refusal (capacity, a store error) raises here, and so does a store that
        does not answer within ``COMMIT_SECONDS`` (the retryable ``ServiceUnavailable``): a
        hung store holds no request for longer.

        A store in memory (``InstantStore``) stores the record at its one checkpoint or not
        at all, and cannot hang: its creation needs neither the shield nor the bound.

        The task is spawned, not started with ``nursery.start``: a ``tasks/cancel`` before
        it first runs is noted in its entry, made here, and the task cancels its scope as it
        starts (its work stops at its first checkpoint). ``start`` would add a nursery and a
        scheduler round trip to every task.
        """
        if record.owner != self.worker_id:
            record = replace(record, owner=self.worker_id)
        nursery = self.nursery  # (raises unless the runner runs: before anything is stored)
        answers = dict(answered) if answered else _NO_ANSWERS
        live = _Live(answers, self._deadline(record), record)  # before its record is stored
        self._live[record.task_id] = live
        if self._instant:  # stored at its one checkpoint, or not at all: no shield needed
            try:
                await self.store.create(record, limits)
            except BaseException:
                del self._live[record.task_id]
                raise
            if not self._spawn(nursery, record.task_id, work, live, handle):
                await self._not_started(record.task_id)
            return
        with trio.CancelScope(shield=True):
            stored = False
            try:
                with trio.move_on_after(COMMIT_SECONDS):
                    await self.store.create(record, limits)
                    stored = True
            except BaseException:
                del self._live[record.task_id]
                raise
            if not stored:
                # The bound cancelled the creation. A store that keeps the contract stored
                # nothing then (a call cancelled before its effect leaves the store as it
                # was; one whose effect happened completes, and ``stored`` is True: the work
                # is spawned below, the client gets its task). A store that broke it may
                # hold the record now, with no work behind it: that record is failed, as a
                # finished task's outcome the store refused is recorded, by ``_resettle``
                # once the store answers (no such record: nothing to do). Either way the
                # client is told to retry, and no task is left "working" with nothing running.
                del self._live[record.task_id]
                self._unsettled[record.task_id] = _NOT_STARTED
                raise ServiceUnavailable("The task store did not answer in time; retry")
            if not self._spawn(nursery, record.task_id, work, live, handle):
                await self._not_started(record.task_id)

    def _spawn(
        self, nursery: trio.Nursery, task_id: str, work: Work | Call, live: _Live, handle: bool
    ) -> bool:
        """Start the stored task's work in the runner nursery; False if the runner closed
        while the record was stored (the run ends: nothing started)."""
        try:
            nursery.start_soon(self._run, task_id, work, live, handle, name=_TASK_NAME)
        except RuntimeError:
            del self._live[task_id]
            return False
        return True

    async def _not_started(self, task_id: str) -> NoReturn:
        """The runner closed before a stored task could start: it is recorded as stopped,
        and its creator told."""
        await self._settle_within_bound(task_id, Stopped())
        raise ServiceUnavailable("Server is shutting down; no new tasks are accepted")

    async def _run(
        self,
        task_id: str,
        work: Callable[..., Awaitable[Mapping[str, Any]]],
        live: _Live,
        handle: bool,
    ) -> None:
        """Run the task to its end and record how it ended. Its record is in ``live`` (the
        one written last): a parked task keeps no other copy.

        The work runs in the task's nursery, in this one frame (a parked task holds every
        frame between the runner and its wait). ``tasks/cancel`` and the TTL (its deadline)
        end the work there: the nursery's scope catches its cancellation (``live`` tells
        which it was). A protocol error fails the task
        with that error inlined; any other error (also from a child, or in a group with the
        task's cancellation) is logged and fails it without detail (T§5.1). Any other
        cancellation (the runner's) propagates, and the task is recorded as stopped. On a
        shared backend the task holds the backend's ``attention`` while it runs, so cancels
        and answers from other workers reach it promptly; with tracing, its span is current
        while its work runs, so the tool's own span nests under it.
        """
        span = self._span(live.written)
        outcome: TaskEvent = _STOPPED  # what stands if the runner itself is cancelled
        try:
            result: Mapping[str, Any] | None = None
            try:
                async with self._task_nursery(span) as nursery:
                    live.nursery = nursery
                    nursery.cancel_scope.deadline = live.deadline
                    if live.cancelled or trio.current_time() >= live.deadline:
                        nursery.cancel_scope.cancel()  # cancelled or expired before it ran
                    await trio.lowlevel.checkpoint_if_cancelled()  # (and then no work)
                    call = work(TaskHandle(self, task_id, nursery)) if handle else work()
                    del work  # (what the call needs, its coroutine holds)
                    result = await call
                    size = None if self.check is None else self.check(result)
            except BaseException as exc:
                error = protocol_error(exc, f"task {task_id}", log=logger)
                await trio.lowlevel.checkpoint()
                outcome = Failed(error.to_error())
            else:
                # None: the scope caught a cancellation (tasks/cancel or the TTL, told below),
                # or the work cancelled its own nursery
                outcome = _WORK_CANCELLED if result is None else Completed(dict(result), size)
            if live.cancelled:  # a client's cancel is honoured, whatever came after
                outcome = CancelRequested()
            elif live.expired:
                outcome = Expired()
        finally:
            live.release()
            await self._settle_within_bound(task_id, outcome)
            del self._live[task_id]
            if live.done is not None:
                live.done.set()
            if span is not None:
                self._end_span(span, live.written, outcome)

    def _task_nursery(self, span: SpanHandle | None) -> AbstractAsyncContextManager[trio.Nursery]:
        """The task's nursery, to open; around it, what this run needs of a task: on a
        shared backend the backend's ``attention``, with tracing its span made current.
        Most tasks need neither: the nursery alone, so that a parked task holds nothing
        more for them."""
        if span is None and not self._shared:
            return trio.open_nursery()
        attention = self.backend.attention() if self._shared and self.backend else None
        return _around(attention, span)

    def _span(self, record: TaskRecord) -> SpanHandle | None:
        """The task's span, from creation to its terminal state: a child of the creating
        request's span (the task inherits that request's context), current while its work
        runs, so the tool's own span nests under it."""
        if self.tracing is None:
            return None
        attributes = {"mcp.task.id": record.task_id, "gen_ai.tool.name": record.tool}
        return self.tracing.start(f"task {record.tool}", attributes)

    def _end_span(self, span: SpanHandle, record: TaskRecord, outcome: TaskEvent) -> None:
        """End the span as the outcome left the task: ``mcp.task.status`` is its terminal
        status; a failure (also an expiry, or the server stopping) is an error with the
        task's inlined code, a tool result with ``isError`` a ``tool_error``. A client's
        ``tasks/cancel`` is how a task is meant to end early: cancelled, not an error."""
        try:
            with error_boundary(f"tracing task {record.task_id}", logger):
                final = apply(record, outcome, self.now_ms())
                span.set("mcp.task.status", final.status.value)
                if final.error is not None:
                    span.fail(str(final.error.get("code")), str(final.error.get("message", "")))
                elif final.result is not None and final.result.get("isError") is True:
                    span.fail("tool_error")
        finally:
            span.end()

    async def _settle_within_bound(self, task_id: str, outcome: TaskEvent) -> None:
        """``_settle``, shielded and bounded: a store that does not answer in time gets the
        outcome offered again later, as one that refused it does. A store in memory cannot
        hang: shielded only."""
        if self._instant:
            with trio.CancelScope(shield=True):
                await self._settle(task_id, outcome)
            return
        with trio.move_on_after(COMMIT_SECONDS, shield=True) as bound:
            await self._settle(task_id, outcome)
        if bound.cancelled_caught:
            logger.error("the task store did not record the outcome of task %s in time", task_id)
            self._unsettled[task_id] = outcome

    async def _settle(self, task_id: str, outcome: TaskEvent) -> None:
        """Record a task's outcome, retrying a failing store a few times (the caller bounds
        it all). A store still failing after that is logged, and the outcome is offered to it
        again every ``RESETTLE_SECONDS`` until it takes it: the server recovers by itself."""
        for pause in (*COMMIT_RETRY_SECONDS, None):
            try:
                await self.commit(task_id, outcome)
                return
            except Exception as exc:
                if pause is None:
                    # a store that is down reported itself; anything else is a bug to show
                    trace = None if isinstance(exc, ServiceUnavailable) else exc
                    logger.error("recording the outcome of task %s failed", task_id, exc_info=trace)
                    self._unsettled[task_id] = outcome
                    await trio.lowlevel.checkpoint()
                    return
                logger.warning("recording the outcome of task %s failed once; retrying", task_id)
                await trio.sleep(pause)

    def _deadline(self, record: TaskRecord) -> float:
        """When the task's TTL runs out, on trio's clock: work never outlives its task."""
        if record.ttl_ms is None:
            return math.inf
        left_ms = record.created_ms + record.ttl_ms - self.now_ms()
        return trio.current_time() + left_ms / 1000

    def shared_keys(self, keys: frozenset[str]) -> frozenset[str]:
        """``keys``, or an equal set another task of this run asked: a tool's tasks ask the
        same keys, and a task keeps the set for its whole life. A larger set than
        ``SHARED_KEYS_MAX`` stays its own, and at most ``SHARED_KEY_SETS`` are kept."""
        if len(keys) > SHARED_KEYS_MAX:
            return keys
        kept = self._asked.get(keys)
        if kept is None:
            if len(self._asked) >= SHARED_KEY_SETS:
                del self._asked[next(iter(self._asked))]
            kept = self._asked[keys] = keys
        return kept

    def provider(self, task_id: str) -> Provider:
        """What answers ``Context.input`` inside task ``task_id`` (a ``_TaskInput``); a
        detached context built with it keeps nothing of the creating request alive."""
        return _TaskInput(self, task_id)

    async def _withdraw(self, task_id: str, keys: frozenset[str]) -> None:
        """Record that the task no longer waits for ``keys`` (``InputsWithdrawn``).

        It runs in the task's nursery, after the wait it follows: when the task itself is
        ending (cancelled, expired, failing, or its runner stopping), it is cancelled at its
        first checkpoint and writes nothing, since the terminal record drops every pending
        request anyway; only a task that goes on has its record changed, shielded and
        bounded as every commit here. A store that fails is logged, and the task goes on.
        """
        await trio.lowlevel.checkpoint()
        with (
            error_boundary(f"withdrawing input keys of task {task_id}", logger),
            trio.move_on_after(COMMIT_SECONDS, shield=True),
        ):
            await self.commit(task_id, InputsWithdrawn(keys))

    async def commit(self, task_id: str, event: TaskEvent) -> TaskRecord | None:
        """Apply ``event`` with compare-and-set, retrying on conflict; None if the task is gone.

        A task running here is first tried from the record this runner last wrote, without
        reading it back (a thread hop or a round trip on a database): only this runner
        changes a running task's record, but for its end by another worker (a cancel, a
        lost-worker failure), and compare-and-set refuses a record someone else has moved
        on. Refused, or with nothing to change, it decides from what the store holds.
        """
        live = self._live.get(task_id)
        if live is not None:
            written = live.written
            updated = apply(written, event, self.now_ms())
            if updated is not written:
                accepted = await self._write(updated, written.revision, live)
                if accepted:
                    return updated
        while True:
            current = await self.store.get(task_id)
            if current is None:
                return None
            updated = apply(current, event, self.now_ms())
            if updated is current:
                return current
            if await self._write(updated, current.revision, live):
                return updated

    async def _write(self, updated: TaskRecord, revision: int, live: _Live | None) -> bool:
        """Store ``updated`` if the stored record is still at ``revision``, and announce it."""
        if not await self.store.compare_and_set(updated, revision):
            return False
        if live is not None:
            live.written = updated
        if self.publish is not None:
            with error_boundary(f"announcing task {updated.task_id}", logger):
                self.publish(updated)
        return True

    async def deliver(self, task_id: str, responses: Mapping[str, Any]) -> frozenset[str]:
        """``tasks/update`` of a task running here: accept the answers to pending keys and
        wake their waiters; returns the keys accepted (the others matched nothing the task
        waits for, and a task that does not run here accepts none).

        Accepting (the commit) and waking (the channel sends) happen together, shielded:
        a request cancelled half-way cannot mark inputs accepted that no waiter received.
        A store that does not answer within ``COMMIT_SECONDS`` is the retryable
        ``ServiceUnavailable``, and nothing is accepted (a store keeping the contract
        completes a write it made, and then the answers are delivered).
        """
        live = self._live.get(task_id)
        if live is None:
            await trio.lowlevel.checkpoint()
            return frozenset()
        with trio.move_on_after(COMMIT_SECONDS, shield=True):
            current = await self.store.get(task_id)
            pending = current.input_requests.keys() if current is not None else frozenset()
            # Claim the channels now, with no checkpoint between the check and the claim: of
            # several updates answering one key, exactly one delivers; the others learn that
            # their answer was not used (it is ignored).
            claimed = live.claim([k for k in responses if k in pending])
            if not claimed:
                return frozenset()
            try:
                await self.commit(task_id, InputsAccepted(frozenset(claimed)))
            except BaseException:
                live.parked += tuple(claimed.items())  # not accepted: still waited for
                raise
            delivered = set()
            for key, send in claimed.items():
                try:
                    send.send_nowait((key, responses[key]))
                    delivered.add(key)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass  # the wait ended (cancelled, say) as the answer arrived: unused
            return frozenset(delivered)
        raise ServiceUnavailable("The task store did not answer in time; retry")

    async def cancel(self, task_id: str) -> None:
        """``tasks/cancel``: cancel the task if it runs here (its scope), wait (bounded) for its
        cleanup, then make sure ``cancelled`` is recorded.

        The runner records ``cancelled`` itself once the task's scope has exited, also when
        the tool swallowed its cancellation and returned a result anyway (the result is
        dropped). A task that ignores its cancellation past the bound gets ``cancelled``
        committed here; terminal states are sticky, so its late result can never resurrect
        it. As with any trio cancellation, code that runs before the task's next checkpoint
        still runs: a tool must not put irreversible effects after its last ``await``. A
        store that does not record the cancellation within ``COMMIT_SECONDS`` is the
        retryable ``ServiceUnavailable`` (a task running here still records its end by
        itself once the store answers).
        """
        live = self._live.get(task_id)
        if live is not None:
            live.cancel()
            if live.done is None:
                live.done = trio.Event()
            with trio.move_on_after(CANCEL_WAIT_SECONDS):
                await live.done.wait()
        # A no-op when the task recorded its end; a task that ended while the store refused
        # its outcome gets that outcome now, not "cancelled" (it had finished).
        outcome = self._unsettled.get(task_id, CancelRequested())
        await self._commit_within_bound(task_id, outcome)
        self._unsettled.pop(task_id, None)
