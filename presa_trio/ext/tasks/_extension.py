"""``TasksExtension``: SEP-2663 on presa_trio's public extension hooks, and nothing else.

It wraps ``tools/call`` with the per-tool task policy, routes ``tasks/get``, ``tasks/update``
and ``tasks/cancel``, advertises ``io.modelcontextprotocol/tasks``, accepts ``taskIds`` in
``subscriptions/listen`` filters, and starts a service per run: the task runner, the reaper
and the run's store. It imports only public presa_trio modules.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, final

import trio

from ... import Context
from ...backends import Backend, SharedBackend
from ...errors import InternalError, InvalidParams, MissingCapability, ServiceUnavailable
from ...extensions import (
    CallNext,
    Extension,
    ExtensionContext,
    Route,
    Tool,
    error_boundary,
    error_result,
    to_json,
)
from . import _wire
from ._runner import TaskHandle, TaskRunner
from ._shared_meta import SharedMetas
from ._sql_store import SqlTaskStore
from ._states import Failed, Status, TaskRecord
from ._store import Limits, MemoryTaskStore, TaskStore

logger = logging.getLogger("presa_trio.tasks")

Policy = Literal["sync", "optional", "required"]
PolicyFunction = Callable[[Context, Mapping[str, Any]], Policy]
POLICIES = ("sync", "optional", "required")
OPTION = "tasks"  # the Tool.options key holding a tool's policy

MAX_TASK_ID_BYTES = 256
MAX_LISTEN_TASK_IDS = 100
REQUIRED: dict[str, Any] = {"extensions": {_wire.EXTENSION_ID: {}}}
#: How long after its TTL an expired record stays stored (invisible) before the reaper
#: deletes it: longer than the runner takes to record a running task's expiry.
REAP_GRACE_MS = 10_000
#: The span attribute naming the answer keys a tasks/update ignored (on the request's span).
IGNORED_KEYS_ATTRIBUTE = "mcp.task.ignored_input_keys"
MAX_SHOWN_KEYS = 16  # a log record or span attribute names at most this many ignored keys,
MAX_SHOWN_KEY_CHARS = 64  # each cut to this many characters: a client chooses them


def _unknown() -> InvalidParams:
    return InvalidParams("Unknown or inaccessible taskId")


@final
@dataclass(frozen=True, slots=True)
class _Run:
    """The tasks service of one run: where its records live and who runs its work."""

    context: ExtensionContext
    store: TaskStore
    runner: TaskRunner
    metas: SharedMetas  # the creating requests' _meta, one copy of each for all tasks


@final
class TasksExtension(Extension):
    """Long tool calls become tasks (SEP-2663).

    Give a tool a policy with ``@server.tool(options={"tasks": "optional"})``: ``"sync"`` (the
    default), ``"optional"`` (a task when the request declares the extension), ``"required"``
    (-32021 otherwise), or a function ``(ctx, arguments) -> policy``. ``principal(ctx)``
    names who a task belongs to (default: the server's ``principal``, which is the bearer
    token's subject under ``presa_trio.auth``); another principal's task is
    indistinguishable from an unknown one. A task of a tool that declares ``scopes`` takes
    ``tasks/update`` and ``tasks/cancel`` only from a token that still holds them. Without a
    ``store``, each run keeps its tasks in memory. A task's input is at most
    ``max_input_bytes`` of JSON (an optional tool given more runs synchronously instead; a
    required one is refused), its result at most ``max_result_bytes`` (a larger one fails
    the task), so what the store holds is bounded: ``limits`` bounds it in count and, for
    the in-memory store, in bytes (``Limits.max_stored_bytes``, whose per-task reserve is
    set to ``max_result_bytes``).
    ``require_name_header=False`` admits ``tasks/*`` requests that carry no ``Mcp-Name``
    header, as today's Python SDK and FastMCP clients send them (the spec says a client MUST
    send it; strict is the default, and a header that is present and wrong is refused
    either way).
    """

    id = _wire.EXTENSION_ID

    def __init__(
        self,
        *,
        store: TaskStore | None = None,
        ttl_ms: int | None = 3_600_000,
        poll_interval_ms: int | None = 250,
        limits: Limits | None = None,
        max_input_bytes: int = 262_144,
        max_result_bytes: int = 262_144,
        principal: Callable[[Context], str] | None = None,
        reap_interval: float = 60.0,
        clock: Callable[[], float] = time.time,
        require_name_header: bool = True,
    ) -> None:
        if ttl_ms is not None and ttl_ms <= 0:
            raise ValueError("ttl_ms must be positive (or None for unlimited)")
        self.store = store
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        # What a running task may still add to the store is its result: the byte bound
        # reserves that much for each (see ``Limits``).
        self.limits = dataclasses.replace(
            limits if limits is not None else Limits(), active_task_reserve_bytes=max_result_bytes
        )
        self.max_input_bytes = max_input_bytes
        self.max_result_bytes = max_result_bytes
        self._principal = principal
        self.reap_interval = reap_interval
        self.clock = clock
        self.require_name_header = require_name_header

    def principal(self, ctx: Context) -> str:
        """Who a task belongs to: ``principal(ctx)``, else the server's principal."""
        return self._principal(ctx) if self._principal is not None else ctx.principal

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ------------------------------------------------------------------ hooks

    def routes(self) -> Iterable[Route]:
        strict = self.require_name_header
        return [
            Route(method, handler, name_param="taskId", requires=REQUIRED,
                  name_header_required=strict)
            for method, handler in (
                ("tasks/get", self._get),
                ("tasks/update", self._update),
                ("tasks/cancel", self._cancel),
            )
        ]  # fmt: skip

    async def serve(self, context: ExtensionContext, *, task_status: trio.TaskStatus[Any]) -> None:
        """One run's tasks service: its store, the task runner and the reapers."""
        backend = context.backend
        store = self.store if self.store is not None else _store_for(backend)

        def publish(record: TaskRecord) -> None:
            context.publish(
                "notifications/tasks",
                _wire.notification(record),
                key="taskIds",
                value=record.task_id,
            )

        runner = TaskRunner(
            store, self.now_ms, publish, backend, context.tracing, check=self._check_finished
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(runner.serve)
            if isinstance(store, SqlTaskStore) and isinstance(backend, SharedBackend):
                nursery.start_soon(self._reap_orphans, store, runner, backend)
            task_status.started(_Run(context, store, runner, SharedMetas()))
            while True:
                await trio.sleep(self.reap_interval)
                with error_boundary("the task reaper", logger), _store_down_is_logged():
                    # Past its TTL a task is already unknown to every request (``_find``);
                    # the reaper deletes it a grace later, so that the runner of a task
                    # still running records (and announces) its expiry before it is gone.
                    await store.delete_expired(self.now_ms() - REAP_GRACE_MS)

    async def _reap_orphans(
        self, store: SqlTaskStore, runner: TaskRunner, backend: SharedBackend
    ) -> None:
        """Fail the unfinished tasks of lost workers (a worker that left, or has not renewed
        its lease), checked every quarter lease by every worker whose own heartbeats have
        held for a lease (``SharedBackend.judges_leases``): a task of a lost worker is
        failed within a lease and a quarter, and an outage of the database fails nothing.
        Compare-and-set makes the first worker to notice the one that commits; a lost worker
        that comes back finds its tasks terminal, and its late outcomes change nothing."""
        lost = InternalError("The worker running this task was lost").to_error()
        while True:
            await trio.sleep(backend.lease / 4)
            if not backend.judges_leases:
                continue
            with error_boundary("the lost-worker reaper", logger), _store_down_is_logged():
                for task_id in await store.orphans(int(backend.lease * 1000)):
                    await runner.commit(task_id, Failed(lost))

    def filter_keys(self) -> frozenset[str]:
        return frozenset({"taskIds"})

    async def accept_filter(self, ctx: Context, requested: Mapping[str, Any]) -> dict[str, Any]:
        if not ctx.has_capability("extensions", self.id):
            raise MissingCapability("Missing required client capability", REQUIRED)
        ids = requested.get("taskIds")
        if (
            not isinstance(ids, list)
            or len(ids) > MAX_LISTEN_TASK_IDS
            or not all(isinstance(i, str) and 0 < len(i.encode()) <= MAX_TASK_ID_BYTES for i in ids)
        ):
            raise InvalidParams(
                f"taskIds must be a list of at most {MAX_LISTEN_TASK_IDS} non-empty task ids"
            )
        run: _Run = ctx.service(self)
        accepted = [i for i in dict.fromkeys(ids) if await self._find(run, ctx, i) is not None]
        await trio.lowlevel.checkpoint()  # an empty filter found nothing, and awaited nothing
        return {"taskIds": accepted} if accepted else {}

    async def call_tool(
        self, ctx: Context, tool: Tool, arguments: Mapping[str, Any], call_next: CallNext
    ) -> dict[str, Any]:
        """Decide sync or task (T§3.2); create the task before answering."""
        if OPTION not in tool.options:  # the common case: a tool that never runs as a task
            return await call_next(ctx, tool, arguments)
        policy = self._policy(ctx, tool, arguments)
        if policy == "sync":
            return await call_next(ctx, tool, arguments)
        declared = ctx.has_capability("extensions", self.id)
        if policy == "optional" and not declared:
            return await call_next(ctx, tool, arguments)
        if not declared:
            raise MissingCapability(f"Tool {tool.name} runs only as a task", REQUIRED)
        errors = tool.argument_errors(arguments)
        if errors:  # the direct call's answer, and no task
            await trio.lowlevel.checkpoint()
            return error_result("Invalid arguments: " + "; ".join(errors))
        size = len(to_json(arguments))
        if size > self.max_input_bytes:
            if policy == "optional":  # declaring Tasks does not mean requiring a task
                return await call_next(ctx, tool, arguments)
            raise InvalidParams(f"Task input is larger than {self.max_input_bytes} bytes")
        run: _Run = ctx.service(self)
        if run.context.draining.is_set():
            raise ServiceUnavailable("Server is shutting down; no new tasks are accepted")
        record = self._new_record(ctx, tool, run.runner.worker_id)
        meta = run.metas.share(ctx.params.get("_meta"), ctx.meta)
        detached = ctx.detached(run.runner.provider(record.task_id), meta=meta)
        detached.extras["task_id"] = record.task_id
        work = functools.partial(_call_detached, call_next, detached, tool, dict(arguments))
        # Only answers to a round the server issued (a verified requestState) seed the task:
        # the MRTR phase and the task phase keep separate state (SEP-2663 §6).
        answered = ctx.input_responses if ctx.state is not None else {}
        await run.runner.launch(record, work, self.limits, answered)
        return _wire.creation(record)

    # ------------------------------------------------------------------ tools/call

    def _policy(self, ctx: Context, tool: Tool, arguments: Mapping[str, Any]) -> Policy:
        policy = tool.options.get(OPTION, "sync")
        if callable(policy):
            try:
                policy = policy(ctx, arguments)
            except Exception:
                logger.exception("task policy of %s raised", tool.name)
                raise InternalError("Task policy failed") from None
        if policy not in POLICIES:
            raise InternalError(f"Tool {tool.name} has an invalid task policy")
        result: Policy = policy
        return result

    def _new_record(self, ctx: Context, tool: Tool, owner: str) -> TaskRecord:
        now = self.now_ms()
        return TaskRecord(
            task_id=secrets.token_urlsafe(24),
            principal=self.principal(ctx),
            tool=tool.name,
            status=Status.WORKING,
            created_ms=now,
            updated_ms=now,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            status_message="Task accepted",
            owner=owner,
        )

    def _check_finished(self, result: Mapping[str, Any]) -> None:
        """A task's work ended: its result must be a complete result the store can keep."""
        if result.get("resultType", "complete") != "complete":
            raise InternalError("Task work ended without a complete result")
        _check_result(result, self.max_result_bytes)

    # ------------------------------------------------------------------ tasks/* methods

    async def _find(self, run: _Run, ctx: Context, task_id: str) -> TaskRecord | None:
        record = await run.store.get(task_id)
        if (
            record is None
            or record.principal != self.principal(ctx)
            or record.expired(self.now_ms())
        ):
            return None
        return record

    async def _lookup(self, run: _Run, ctx: Context, params: Mapping[str, Any]) -> TaskRecord:
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise InvalidParams("A non-empty taskId is required")
        if len(task_id.encode()) > MAX_TASK_ID_BYTES:
            raise InvalidParams(f"taskId is longer than {MAX_TASK_ID_BYTES} bytes")
        record = await self._find(run, ctx, task_id)
        if record is None:
            raise _unknown()
        return record

    async def _get(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        record = await self._lookup(ctx.service(self), ctx, params)
        return _wire.detailed(record)

    async def _update(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """Deliver the answers to the keys the task is waiting for (SEP-2663); acknowledge.

        An answer to a key that is not outstanding (never asked, answered already, or
        withdrawn because the tool stopped waiting for it), and any answer to a task that
        has ended, is ignored and acknowledged all the same (SEP-2663 "SHOULD ignore";
        T§4.3): the client learns nothing it could not read with ``tasks/get``. Operators see
        the ignored keys in a debug record and on the request's span. Malformed answers, and
        an answer to an outstanding key that is not its request's result type, are -32602.
        """
        responses = params.get("inputResponses")
        if not isinstance(responses, dict):
            raise InvalidParams("tasks/update requires an inputResponses object")
        if any(not key or not isinstance(value, dict) for key, value in responses.items()):
            raise InvalidParams("inputResponses is invalid")
        run: _Run = ctx.service(self)
        record = await self._lookup(run, ctx, params)
        _require_tool_scopes(run, ctx, record)
        if record.terminal:
            why = f"the task is {record.status.value}"
            _report_ignored(run, record.task_id, responses.keys(), why)
            return {}
        run.context.check_input_responses(record.input_requests, responses)
        accepted = await run.runner.deliver(record.task_id, responses, record.owner)
        ignored = responses.keys() - accepted
        if ignored:
            _report_ignored(run, record.task_id, ignored, "not outstanding")
        return {}

    async def _cancel(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        run: _Run = ctx.service(self)
        record = await self._lookup(run, ctx, params)
        _require_tool_scopes(run, ctx, record)
        if not record.terminal:
            await run.runner.cancel(record.task_id, record.owner)
        return {}


def _require_tool_scopes(run: _Run, ctx: Context, record: TaskRecord) -> None:
    """A task steered on (answered, cancelled) needs what calling its tool needed: the
    tool's scopes (403 without them, ``presa_trio.auth``). Reading it (``tasks/get``) needs
    only to be its principal."""
    tool = run.context.tool(record.tool)
    if tool is not None and tool.scopes:
        ctx.require_scopes(*tool.scopes)


def _report_ignored(run: _Run, task_id: str, keys: Iterable[str], why: str) -> None:
    """Say which answers a ``tasks/update`` ignored: to operators, never on the wire."""
    ordered = sorted(keys)
    shown = [key[:MAX_SHOWN_KEY_CHARS] for key in ordered[:MAX_SHOWN_KEYS]]
    if len(ordered) > MAX_SHOWN_KEYS:
        shown.append(f"... and {len(ordered) - MAX_SHOWN_KEYS} more")
    logger.debug("tasks/update of task %s ignored input keys %s: %s", task_id, shown, why)
    tracing = run.context.tracing
    if tracing is not None:
        tracing.annotate(IGNORED_KEYS_ATTRIBUTE, shown)


def _store_down_is_logged() -> contextlib.AbstractContextManager[None]:
    """A store that is down was reported (once) where it failed: the next round retries."""
    return contextlib.suppress(ServiceUnavailable)


def _store_for(backend: Backend) -> TaskStore:
    """The store a run keeps its tasks in: the shared database, or this process."""
    if isinstance(backend, SharedBackend):
        return SqlTaskStore(backend.db)
    return MemoryTaskStore()


def _call_detached(
    call_next: CallNext,
    ctx: Context,
    tool: Tool,
    arguments: Mapping[str, Any],
    handle: TaskHandle,
) -> Awaitable[Mapping[str, Any]]:
    """A task's work: the tool call on its detached context (T§5.3), which keeps nothing of
    the creating request's responder, headers or stream alive. The runner awaits the tool
    call's own coroutine (no frame of ours stays parked with it) and hands the result to
    ``TasksExtension._check_finished``."""
    return call_next(ctx, tool, arguments)


def _check_result(result: Mapping[str, Any], limit: int) -> None:
    """A task's result is stored and served for its whole TTL: it must be JSON (no ``NaN``,
    no lone surrogate) and at most ``limit`` bytes, or the task fails now, readably."""
    try:
        size = len(to_json(result))
    except (ValueError, UnicodeEncodeError, TypeError):
        raise InternalError("Task result is not JSON") from None
    if size > limit:
        raise InternalError(f"Task result is larger than {limit} bytes")
