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
from functools import partial
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
from ._runner import TaskRunner
from ._service import TaskChanges, TasksService, require_tool_scopes
from ._session_wire import VERSIONS as SESSION_VERSIONS
from ._sessions import SessionTasks
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


def new_task_id() -> str:
    """A new task id: 32 URL-safe characters (192 random bits) that never start with ``-``,
    so that an id can be given to a command line (``presa-trio tasks show ID``) as it is."""
    while (task_id := secrets.token_urlsafe(24)).startswith("-"):
        pass  # one id in 64 starts with "-": draw again (the others stay equally likely)
    return task_id


def _unknown() -> InvalidParams:
    return InvalidParams("Unknown or inaccessible taskId")


@final
class TasksExtension(Extension[TasksService]):
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
    On a 2025-11-25 session (``initialize``) the same tasks are served the way that revision
    writes them: a ``tools/call`` with ``params.task`` creates one, and ``tasks/get``,
    ``tasks/result``, ``tasks/list`` (pages of ``list_page_size``) and ``tasks/cancel``
    read and steer it (``_sessions``).
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
        list_page_size: int = 50,
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
        if list_page_size < 1:
            raise ValueError("list_page_size must be at least 1")
        self.list_page_size = list_page_size
        self._sessions = SessionTasks(self)

    def principal(self, ctx: Context) -> str:
        """Who a task belongs to: ``principal(ctx)``, else the server's principal."""
        return self._principal(ctx) if self._principal is not None else ctx.principal

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def service_of(self, ctx: Context) -> TasksService:
        """The tasks service of ``ctx``'s run."""
        return ctx.service(self)

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

    def session_routes(self, version: str) -> Iterable[Route]:
        return self._sessions.routes() if version in SESSION_VERSIONS else ()

    def session_capabilities(self, ctx: Context) -> Mapping[str, Any]:
        return self._sessions.capabilities(ctx)

    def session_tool(self, ctx: Context, tool: Tool) -> Mapping[str, Any]:
        return self._sessions.tool_fields(ctx, tool)

    async def serve(self, context: ExtensionContext, *, task_status: trio.TaskStatus[Any]) -> None:
        """One run's tasks service: its store, the task runner, the forwarder and the
        reapers. The lost-worker reaper runs whenever the store keeps leases and the backend
        keeps worker leases (both protocols, whoever implements them)."""
        backend = context.backend
        store = self.store if self.store is not None else self.store_factory(backend)
        changes = TaskChanges()

        def publish(record: TaskRecord) -> None:
            changes.changed(record.task_id)
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
            task_status.started(
                TasksService(context, store, runner, forwarder, SharedMetas(), changes)
            )
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
        run: TasksService = ctx.service(self)
        accepted = [i for i in dict.fromkeys(ids) if await self.find(run, ctx, i) is not None]
        await trio.lowlevel.checkpoint()  # an empty filter found nothing, and awaited nothing
        return {"taskIds": accepted} if accepted else {}

    async def call_tool(
        self, ctx: Context, tool: Tool, arguments: Mapping[str, Any], call_next: CallNext
    ) -> dict[str, Any]:
        """Decide sync or task (T§3.2); create the task before answering. On a 2025-11-25
        session, ``params.task`` decides (``SessionTasks.call_tool``)."""
        if ctx.session is not None and ctx.meta.protocol_version in SESSION_VERSIONS:
            return await self._sessions.call_tool(ctx, tool, arguments, call_next)
        if OPTION not in tool.options:  # the common case: a tool that never runs as a task
            return await call_next(ctx, tool, arguments)
        policy = self.policy(ctx, tool, arguments)
        if policy == "sync":
            return await call_next(ctx, tool, arguments)
        declared = ctx.has_capability("extensions", self.id)
        if policy == "optional" and not declared:
            return await call_next(ctx, tool, arguments)
        if not declared:
            raise MissingCapability(f"Tool {tool.name} runs only as a task", REQUIRED)
        started = await self.start(ctx, tool, arguments, call_next, policy)
        return _wire.creation(started) if isinstance(started, TaskRecord) else started

    async def start(
        self,
        ctx: Context,
        tool: Tool,
        arguments: Mapping[str, Any],
        call_next: CallNext,
        policy: Policy,
        ttl_ms: int | None = None,
    ) -> TaskRecord | dict[str, Any]:
        """Create and launch the task of a call that runs as one, in either era; its record,
        or the direct answer when it does not become a task after all (invalid arguments, or
        an optional tool's input too large). ``ttl_ms`` is the client's wish (2025-11-25
        ``params.task.ttl``): granted up to the extension's ``ttl_ms``."""
        # Checked and converted here, once: the task's run calls the tool with what is bound
        bound = tool.bound(arguments)
        if isinstance(bound, list):  # the direct call's answer, and no task
            await trio.lowlevel.checkpoint()
            return error_result("Invalid arguments: " + "; ".join(bound))
        size = len(to_json(arguments))
        if size > self.max_input_bytes:
            if policy == "optional":  # declaring Tasks does not mean requiring a task
                return await call_next(ctx, tool, bound)  # (bound already: not again)
            raise InvalidParams(f"Task input is larger than {self.max_input_bytes} bytes")
        run: TasksService = ctx.service(self)
        if run.context.draining.is_set():
            raise ServiceUnavailable("Server is shutting down; no new tasks are accepted")
        record = self._new_record(ctx, tool, run.runner.worker_id, ttl_ms)
        meta = run.metas.share(ctx.params.get("_meta"), ctx.meta)
        detached = ctx.detached(run.runner.provider(record.task_id), meta=meta)
        detached.extras["task_id"] = record.task_id
        # The tool call is the task's work, on its detached context (T§5.3), which keeps
        # nothing of the creating request's responder, headers or stream alive: no handle
        # (the tool reaches its task through its context), no frame between the runner and
        # the call. The runner hands the result to ``_check_finished``.
        work = partial(call_next, detached, tool, bound)
        # Only answers to a round the server issued (a verified requestState) seed the task:
        # the MRTR phase and the task phase keep separate state (SEP-2663 §6).
        answered = ctx.input_responses if ctx.state is not None else {}
        await run.runner.launch(record, work, self.limits, answered, handle=False)
        return record

    # ------------------------------------------------------------------ tools/call

    def policy(self, ctx: Context, tool: Tool, arguments: Mapping[str, Any]) -> Policy:
        """How this call of ``tool`` runs: its policy, or what its policy function says."""
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

    def _new_record(
        self, ctx: Context, tool: Tool, owner: str, wished_ttl_ms: int | None = None
    ) -> TaskRecord:
        now = self.now_ms()
        ttl_ms = self.ttl_ms
        if wished_ttl_ms is not None:  # at least a second: a task must outlive its creation
            wished = max(wished_ttl_ms, 1000)
            ttl_ms = wished if ttl_ms is None else min(wished, ttl_ms)
        return TaskRecord(
            task_id=new_task_id(),
            principal=self.principal(ctx),
            tool=tool.name,
            status=Status.WORKING,
            created_ms=now,
            updated_ms=now,
            ttl_ms=ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            status_message="Task accepted",
            owner=owner,
        )

    def _check_finished(self, result: Mapping[str, Any]) -> int:
        """A task's work ended: its result must be a complete result the store can keep.
        Its size as JSON, measured by the check (the store counts it, not measuring again)."""
        if result.get("resultType", "complete") != "complete":
            raise InternalError("Task work ended without a complete result")
        return _check_result(result, self.max_result_bytes)

    # ------------------------------------------------------------------ tasks/* methods

    async def find(self, run: TasksService, ctx: Context, task_id: str) -> TaskRecord | None:
        """Task ``task_id`` if it is ``ctx``'s principal's and not expired, else None."""
        record = await run.store.get(task_id)
        if (
            record is None
            or record.principal != self.principal(ctx)
            or record.expired(self.now_ms())
        ):
            return None
        return record

    async def lookup(
        self, run: TasksService, ctx: Context, params: Mapping[str, Any]
    ) -> TaskRecord:
        """The task ``params.taskId`` names, as ``find`` finds it; -32602 otherwise."""
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise InvalidParams("A non-empty taskId is required")
        if len(task_id.encode()) > MAX_TASK_ID_BYTES:
            raise InvalidParams(f"taskId is longer than {MAX_TASK_ID_BYTES} bytes")
        record = await self.find(run, ctx, task_id)
        if record is None:
            raise _unknown()
        return record

    async def _get(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        record = await self.lookup(ctx.service(self), ctx, params)
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
        run: TasksService = ctx.service(self)
        record = await self.lookup(run, ctx, params)
        require_tool_scopes(run, ctx, record)
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
        run: TasksService = ctx.service(self)
        record = await self.lookup(run, ctx, params)
        require_tool_scopes(run, ctx, record)
        if not record.terminal:
            await run.forwarder.cancel(record.task_id, record.owner)
        return {}


def _report_ignored(run: TasksService, task_id: str, keys: Iterable[str], why: str) -> None:
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


def _check_result(result: Mapping[str, Any], limit: int) -> int:
    """A task's result is stored and served for its whole TTL: it must be JSON (no ``NaN``,
    no lone surrogate) and at most ``limit`` bytes, or the task fails now, readably. Its
    size in bytes, as ``to_json`` writes it."""
    try:
        size = len(to_json(result))
    except (ValueError, UnicodeEncodeError, TypeError):
        raise InternalError("Task result is not JSON") from None
    if size > limit:
        raise InternalError(f"Task result is larger than {limit} bytes")
    return size
