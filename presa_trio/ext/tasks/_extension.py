"""``TasksExtension``: SEP-2663 on presa_trio's public extension hooks, and nothing else.

It wraps ``tools/call`` with the per-tool task policy, routes ``tasks/get``, ``tasks/update``
and ``tasks/cancel``, advertises ``io.modelcontextprotocol/tasks``, accepts ``taskIds`` in
``subscriptions/listen`` filters, and starts a service per run: the run's store (chosen by
the ``store_factory`` hook), the task runner, the forwarder that reaches tasks other workers
run, and the reapers. It imports only public presa_trio modules.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, final

import trio

from ... import Context
from ...backends import Backend, SqlBacked, WorkerLeases
from ...errors import InternalError, InvalidParams, MissingCapability, ServiceUnavailable
from ...extensions import (
    CallNext,
    Extension,
    ExtensionContext,
    Route,
    Tool,
    error_result,
    to_json,
)
from . import _wire
from ._forwarding import Forwarder
from ._reapers import reap_expired, reap_orphans
from ._runner import TaskHandle, TaskRunner
from ._shared_meta import SharedMetas
from ._sql_store import SqlTaskStore
from ._states import Status, TaskRecord
from ._store import LeaseStore, MemoryTaskStore, TaskLimits, TaskStore

logger = logging.getLogger("presa_trio.tasks")

Policy = Literal["sync", "optional", "required"]
PolicyFunction = Callable[[Context, Mapping[str, Any]], Policy]
POLICIES = ("sync", "optional", "required")
OPTION = "tasks"  # the Tool.options key holding a tool's policy

MAX_TASK_ID_BYTES = 256
MAX_LISTEN_TASK_IDS = 100
REQUIRED: dict[str, Any] = {"extensions": {_wire.EXTENSION_ID: {}}}
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
    forwarder: Forwarder  # tasks/update and tasks/cancel, sent where the task runs
    metas: SharedMetas  # the creating requests' _meta, one copy of each for all tasks


@final
class TasksExtension(Extension[_Run]):
    """Long tool calls become tasks (SEP-2663).

    Give a tool a policy with ``@server.tool(options={"tasks": "optional"})``: ``"sync"`` (the
    default), ``"optional"`` (a task when the request declares the extension), ``"required"``
    (-32021 otherwise), or a function ``(ctx, arguments) -> policy``. ``principal(ctx)``
    names who a task belongs to (default: the server's ``principal``, which is the bearer
    token's subject under ``presa_trio.auth``); another principal's task is
    indistinguishable from an unknown one. A task of a tool that declares ``scopes`` takes
    ``tasks/update`` and ``tasks/cancel`` only from a token that still holds them.

    Each run keeps its tasks in the store ``store_factory(backend)`` returns, given the
    run's backend; the default (``default_store``) is the backend's SQL database when it has
    one (``SqlBacked``), so that every worker sees every task, and this process's memory
    otherwise. ``store=`` gives one store to every run instead. When the store keeps leases
    (``LeaseStore``) and the backend keeps worker leases (``WorkerLeases``), the tasks of a
    worker that was lost are failed (-32603). A task's input is at most
    ``max_input_bytes`` of JSON (an optional tool given more runs synchronously instead; a
    required one is refused), its result at most ``max_result_bytes`` (a larger one fails
    the task), so what the store holds is bounded: ``limits`` bounds it in count and, for
    the in-memory store, in bytes (``TaskLimits.max_stored_bytes``, whose per-task reserve
    is set to ``max_result_bytes``).
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
        store_factory: Callable[[Backend], TaskStore] | None = None,
        ttl_ms: int | None = 3_600_000,
        poll_interval_ms: int | None = 250,
        limits: TaskLimits | None = None,
        max_input_bytes: int = 262_144,
        max_result_bytes: int = 262_144,
        principal: Callable[[Context], str] | None = None,
        reap_interval: float = 60.0,
        clock: Callable[[], float] = time.time,
        require_name_header: bool = True,
    ) -> None:
        if ttl_ms is not None and ttl_ms <= 0:
            raise ValueError("ttl_ms must be positive (or None for unlimited)")
        if store is not None and store_factory is not None:
            raise ValueError("give a store or a store_factory, not both")
        self.store = store
        self.store_factory = store_factory if store_factory is not None else default_store
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        # What a running task may still add to the store is its result: the byte bound
        # reserves that much for each (see ``TaskLimits``).
        self.limits = dataclasses.replace(
            limits if limits is not None else TaskLimits(),
            active_task_reserve_bytes=max_result_bytes,
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
        """One run's tasks service: its store, the task runner, the forwarder and the
        reapers. The lost-worker reaper runs whenever the store keeps leases and the backend
        keeps worker leases (both protocols, whoever implements them)."""
        backend = context.backend
        store = self.store if self.store is not None else self.store_factory(backend)

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
        forwarder = Forwarder(runner, backend)
        async with trio.open_nursery() as nursery:
            await nursery.start(runner.serve)
            forwarder.answer_other_workers()
            if isinstance(store, LeaseStore) and isinstance(backend, WorkerLeases):
                nursery.start_soon(reap_orphans, store, runner, backend)
            task_status.started(_Run(context, store, runner, forwarder, SharedMetas()))
            # Past its TTL a task is already unknown to every request (``_find``); the
            # reaper deletes it a grace later.
            await reap_expired(store, self.now_ms, self.reap_interval)

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
        work = _ToolCall(call_next, detached, tool, dict(arguments))
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
        accepted = await run.forwarder.deliver(record.task_id, responses, record.owner)
        ignored = responses.keys() - accepted
        if ignored:
            _report_ignored(run, record.task_id, ignored, "not outstanding")
        return {}

    async def _cancel(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        run: _Run = ctx.service(self)
        record = await self._lookup(run, ctx, params)
        _require_tool_scopes(run, ctx, record)
        if not record.terminal:
            await run.forwarder.cancel(record.task_id, record.owner)
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


def default_store(backend: Backend) -> TaskStore:
    """The store a run keeps its tasks in unless ``TasksExtension`` is told otherwise: the
    backend's SQL database when it has one (``SqlBacked``: every worker sees every task, and
    the store keeps leases), else this process's memory."""
    if isinstance(backend, SqlBacked):
        return SqlTaskStore(backend.db)
    return MemoryTaskStore()


@final
class _ToolCall:
    """A task's work: the tool call on its detached context (T§5.3), which keeps nothing of
    the creating request's responder, headers or stream alive. The runner hands the result
    to ``TasksExtension._check_finished``."""

    __slots__ = ("arguments", "call_next", "ctx", "tool")

    def __init__(
        self, call_next: CallNext, ctx: Context, tool: Tool, arguments: Mapping[str, Any]
    ) -> None:
        self.call_next = call_next
        self.ctx = ctx
        self.tool = tool
        self.arguments = arguments

    async def __call__(self, handle: TaskHandle) -> Mapping[str, Any]:
        return await self.call_next(self.ctx, self.tool, self.arguments)


def _check_result(result: Mapping[str, Any], limit: int) -> None:
    """A task's result is stored and served for its whole TTL: it must be JSON (no ``NaN``,
    no lone surrogate) and at most ``limit`` bytes, or the task fails now, readably."""
    try:
        size = len(to_json(result))
    except (ValueError, UnicodeEncodeError, TypeError):
        raise InternalError("Task result is not JSON") from None
    if size > limit:
        raise InternalError(f"Task result is larger than {limit} bytes")
