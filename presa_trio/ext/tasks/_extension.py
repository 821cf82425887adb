"""``TasksExtension``: SEP-2663 on presa_trio's generic extension hooks.

It wraps ``tools/call`` with the per-tool task policy, routes ``tasks/get``, ``tasks/update``
and ``tasks/cancel``, advertises ``io.modelcontextprotocol/tasks``, runs the task runner in the
server's lifespan nursery, and accepts ``taskIds`` in ``subscriptions/listen`` filters.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import trio

from ..._context import Context
from ..._dispatch import Method
from ..._extensions import CallTool, Extension
from ..._mrtr import RESPONSE_DEFINITIONS
from ..._registry import Tool, error_result
from ..._subscriptions import Event
from ..._wire.dialect import RequestMeta, has_extension
from ...errors import InternalError, InvalidParams, MissingCapability
from . import _wire
from ._runner import TaskHandle, TaskRunner
from ._states import Status, TaskRecord
from ._store import CapacityExceeded, Limits, MemoryTaskStore, TaskStore

if TYPE_CHECKING:
    from ..._server import Server

logger = logging.getLogger("presa_trio.tasks")

Policy = Literal["sync", "optional", "required"]
PolicyFunction = Callable[[Context, Mapping[str, Any]], Policy]
POLICIES = ("sync", "optional", "required")
OPTION = "tasks"  # the Tool.options key holding a tool's policy

MAX_TASK_ID_BYTES = 256
MAX_LISTEN_TASK_IDS = 100
REQUIRED: dict[str, Any] = {"extensions": {_wire.EXTENSION_ID: {}}}


def _unknown() -> InvalidParams:
    return InvalidParams("Unknown or inaccessible taskId")


class TasksExtension(Extension):
    """Long tool calls become tasks (SEP-2663).

    Give a tool a policy with ``@server.tool(options={"tasks": "optional"})``: ``"sync"`` (the
    default), ``"optional"`` (a task when the request declares the extension), ``"required"``
    (-32021 otherwise), or a function ``(ctx, arguments) -> policy``. ``scope(ctx)`` names the
    principal a task belongs to (default: the server's ``principal``); another scope's task is
    indistinguishable from an unknown one.
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
        scope: Callable[[Context], str] | None = None,
        reap_interval: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if ttl_ms is not None and ttl_ms <= 0:
            raise ValueError("ttl_ms must be positive (or None for unlimited)")
        self.store = store if store is not None else MemoryTaskStore()
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.limits = limits if limits is not None else Limits()
        self.max_input_bytes = max_input_bytes
        self._scope = scope
        self.reap_interval = reap_interval
        self.clock = clock
        self.server: Server | None = None
        self.runner = TaskRunner(self.store, self.now_ms, self._publish)

    def scope(self, ctx: Context) -> str:
        """The principal a task belongs to: ``scope(ctx)``, else the server's ``principal``."""
        if self._scope is not None:
            return self._scope(ctx)
        principal = ctx.server.principal
        return principal(ctx) if principal is not None else ""

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ------------------------------------------------------------------ hooks

    def methods(self, server: Server) -> Iterable[Method]:
        self.server = server
        gate = self._gate
        return [
            Method("tasks/get", self._get, name_param="taskId", gate=gate),
            Method("tasks/update", self._update, name_param="taskId", gate=gate),
            Method("tasks/cancel", self._cancel, name_param="taskId", gate=gate),
        ]

    async def serve(self, server: Server, *, task_status: trio.TaskStatus[None]) -> None:
        """Run the task runner and the reaper inside the server's lifespan nursery."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.runner.serve)
            task_status.started()
            while True:
                await trio.sleep(self.reap_interval)
                await self.store.delete_expired(self.now_ms())

    def filter_keys(self) -> frozenset[str]:
        return frozenset({"taskIds"})

    async def accept_filter(self, ctx: Context, requested: Mapping[str, Any]) -> dict[str, Any]:
        self._gate(ctx.meta, {})
        ids = requested.get("taskIds")
        if (
            not isinstance(ids, list)
            or len(ids) > MAX_LISTEN_TASK_IDS
            or not all(isinstance(i, str) and 0 < len(i.encode()) <= MAX_TASK_ID_BYTES for i in ids)
        ):
            raise InvalidParams(
                f"taskIds must be a list of at most {MAX_LISTEN_TASK_IDS} non-empty task ids"
            )
        accepted = [i for i in dict.fromkeys(ids) if await self._find(ctx, i) is not None]
        return {"taskIds": accepted} if accepted else {}

    async def call_tool(
        self, ctx: Context, tool: Tool, arguments: Mapping[str, Any], call_next: CallTool
    ) -> dict[str, Any]:
        """Decide sync or task (T§3.2); create the task before answering."""
        policy = self._policy(ctx, tool, arguments)
        declared = has_extension(ctx.capabilities, self.id)
        if policy == "sync" or (policy == "optional" and not declared):
            return await call_next(ctx, tool, arguments)
        if not declared:
            raise MissingCapability(f"Tool {tool.name} runs only as a task", REQUIRED)
        errors = tool.argument_errors(arguments)
        if errors:  # the direct call's answer, and no task
            return error_result("Invalid arguments: " + "; ".join(errors))
        size = len(json.dumps(arguments, separators=(",", ":")).encode())
        if size > self.max_input_bytes:
            raise InvalidParams(f"Task input is larger than {self.max_input_bytes} bytes")
        record = self._new_record(ctx, tool)
        try:
            await self.store.create(record, self.limits)
        except CapacityExceeded as full:
            raise InternalError(
                "Task capacity exhausted", {"retryable": True, "limit": full.limit}
            ) from None
        self.runner.start(record, self._work(ctx, tool, arguments, call_next), ctx.input_responses)
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

    def _new_record(self, ctx: Context, tool: Tool) -> TaskRecord:
        now = self.now_ms()
        return TaskRecord(
            task_id=secrets.token_urlsafe(24),
            scope=self.scope(ctx),
            tool=tool.name,
            status=Status.WORKING,
            created_ms=now,
            updated_ms=now,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            status_message="Task accepted",
        )

    def _work(
        self, ctx: Context, tool: Tool, arguments: Mapping[str, Any], call_next: CallTool
    ) -> Callable[[TaskHandle], Any]:
        """The detached call: same client facts, no way back to the creating request (T§5.3).

        Only plain facts are captured, never ``ctx`` itself: a parked task must not keep the
        creating request's responder, headers or stream alive.
        """
        server, request_id, meta = ctx.server, ctx.request_id, ctx.meta
        params = {
            k: v for k, v in ctx.params.items() if k not in ("inputResponses", "requestState")
        }
        arguments = dict(arguments)

        async def work(handle: TaskHandle) -> Mapping[str, Any]:
            detached = Context(server, request_id, "tools/call", params, meta, _drop)
            detached.extras["task_id"] = handle.task_id
            detached.input_provider = handle.provide
            result = await call_next(detached, tool, arguments)
            if result.get("resultType") != "complete":
                raise InternalError("Task work ended without a complete result")
            return server.stamp(dict(result))

        return work

    # ------------------------------------------------------------------ tasks/* methods

    def _gate(self, meta: RequestMeta, params: Mapping[str, Any]) -> None:
        if not has_extension(meta.client_capabilities, self.id):
            raise MissingCapability("Missing required client capability", REQUIRED)

    async def _find(self, ctx: Context, task_id: str) -> TaskRecord | None:
        record = await self.store.get(task_id)
        if record is None or record.scope != self.scope(ctx) or record.expired(self.now_ms()):
            return None
        return record

    async def _lookup(self, ctx: Context, params: Mapping[str, Any]) -> TaskRecord:
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise InvalidParams("A non-empty taskId is required")
        if len(task_id.encode()) > MAX_TASK_ID_BYTES:
            raise InvalidParams(f"taskId is longer than {MAX_TASK_ID_BYTES} bytes")
        record = await self._find(ctx, task_id)
        if record is None:
            raise _unknown()
        return record

    async def _get(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        record = await self._lookup(ctx, params)
        return _stamp(ctx, _wire.detailed(record))

    async def _update(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        responses = params.get("inputResponses")
        if not isinstance(responses, dict):
            raise InvalidParams("tasks/update requires an inputResponses object")
        if any(not key or not isinstance(value, dict) for key, value in responses.items()):
            raise InvalidParams("inputResponses is invalid")
        record = await self._lookup(ctx, params)
        for key, request in record.input_requests.items():
            if key in responses:
                definition = RESPONSE_DEFINITIONS.get(request.get("method", ""))
                violations = (
                    ctx.server.schemas.violations(definition, responses[key]) if definition else []
                )
                if violations:
                    raise InvalidParams(f"inputResponses.{key} is not a valid {definition}")
        await self.runner.deliver(record.task_id, responses)
        return _stamp(ctx, {"resultType": "complete"})

    async def _cancel(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        record = await self._lookup(ctx, params)
        if not record.terminal:
            await self.runner.cancel(record.task_id)
        return _stamp(ctx, {"resultType": "complete"})

    # ------------------------------------------------------------------ notifications

    def _publish(self, record: TaskRecord) -> None:
        if self.server is None:
            return
        task_id = record.task_id
        params = _wire.notification(record)
        self.server.bus.publish(
            Event("notifications/tasks", params, lambda f: task_id in (f.get("taskIds") or ()))
        )


async def _drop(message: dict[str, Any]) -> None:
    """A task has no stream: progress and log notifications go nowhere (SEP-2663)."""


def _stamp(ctx: Context, result: dict[str, Any]) -> dict[str, Any]:
    return ctx.server.stamp(result)
