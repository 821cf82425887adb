"""Tasks on the older era's 2025-11-25 sessions (spec 2025-11-25 basic/utilities/tasks), on
the same store, runner and records as SEP-2663 tasks.

A ``tools/call`` with ``params.task`` creates a task as a 2026-07-28 call does
(``TasksExtension.start``); ``tasks/get``, ``tasks/list`` and ``tasks/cancel`` read and
steer it; ``tasks/result`` waits for its end. While it waits, the questions the task asks
(``ctx.input`` in the tool) are pushed to the client on that request's stream, tied to the
task by the related-task ``_meta``, and the answers are delivered where the task runs, the
path ``tasks/update`` takes. What it does not do: run tasks, or decide their states.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, final

import trio

from ... import Context
from ...errors import InternalError, InvalidParams, McpError, MethodNotFound
from ...extensions import CallNext, Route, Tool
from . import _session_wire as wire
from ._service import TasksService, require_tool_scopes
from ._states import Status, TaskRecord
from ._store import ListingStore

#: How long a ``tasks/result`` waits for a task with no TTL (a task with one is over by its
#: TTL: the wait ends then, plus ``EXPIRY_GRACE_SECONDS``).
UNLIMITED_WAIT_SECONDS = 3600.0
EXPIRY_GRACE_SECONDS = 5.0
#: A waiter on a task running on another worker reads the store again after this long at
#: most (the task's ``pollInterval`` when shorter, never below ``MIN_POLL_SECONDS``); one on
#: this worker is woken by the write itself.
MAX_POLL_SECONDS = 1.0
MIN_POLL_SECONDS = 0.05


class _Host(Protocol):
    """What this needs of ``TasksExtension`` (a protocol: no import of it here)."""

    list_page_size: int

    def service_of(self, ctx: Context) -> TasksService: ...

    def principal(self, ctx: Context) -> str: ...

    def now_ms(self) -> int: ...

    def policy(self, ctx: Context, tool: Tool, arguments: Mapping[str, Any]) -> str: ...

    async def start(
        self,
        ctx: Context,
        tool: Tool,
        arguments: Mapping[str, Any],
        call_next: CallNext,
        policy: Any,
        ttl_ms: int | None = None,
    ) -> TaskRecord | dict[str, Any]: ...

    async def find(self, run: TasksService, ctx: Context, task_id: str) -> TaskRecord | None: ...

    async def lookup(
        self, run: TasksService, ctx: Context, params: Mapping[str, Any]
    ) -> TaskRecord: ...


@final
class TaskFailed(McpError):
    """What ``tasks/result`` answers for a failed task: the error the call would have
    answered, code and all (stored with the task)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(str(error.get("message", "Task failed")), error.get("data"))
        self._error = dict(error)

    def to_error(self) -> dict[str, Any]:
        return dict(self._error)


@final
class SessionTasks:
    """The 2025-11-25 face of one ``TasksExtension``."""

    def __init__(self, host: _Host) -> None:
        self._host = host

    def routes(self) -> list[Route]:
        return [
            Route("tasks/get", self._get, result_def="GetTaskResult"),
            Route("tasks/result", self._result, result_def="GetTaskPayloadResult"),
            Route("tasks/list", self._list, result_def="ListTasksResult"),
            Route("tasks/cancel", self._cancel, result_def="CancelTaskResult"),
        ]

    def capabilities(self, ctx: Context) -> dict[str, Any]:
        if ctx.meta.protocol_version not in wire.VERSIONS:
            return {}
        listing = isinstance(self._host.service_of(ctx).store, ListingStore)
        return wire.capabilities(listing=listing)

    def tool_fields(self, ctx: Context, tool: Tool) -> dict[str, Any]:
        policy = tool.options.get("tasks", "sync")
        if ctx.meta.protocol_version not in wire.VERSIONS or policy == "sync":
            return {}  # absent is "forbidden"
        support = wire.TASK_SUPPORT.get(policy, "optional") if isinstance(policy, str) else None
        return {"execution": {"taskSupport": support or "optional"}}

    # ------------------------------------------------------------------ tools/call

    async def call_tool(
        self, ctx: Context, tool: Tool, arguments: Mapping[str, Any], call_next: CallNext
    ) -> dict[str, Any]:
        """``params.task`` asks for a task; the tool's policy says whether it may (-32601
        when not, as 2025-11-25 says, both ways)."""
        asked = ctx.params.get("task")
        policy = self._host.policy(ctx, tool, arguments) if "tasks" in tool.options else "sync"
        if asked is None:
            if policy == "required":
                raise MethodNotFound(f"Tool {tool.name} runs only as a task: send params.task")
            return await call_next(ctx, tool, arguments)
        if policy == "sync":
            raise MethodNotFound(f"Tool {tool.name} does not run as a task")
        ttl = asked.get("ttl") if isinstance(asked, dict) else None
        wished = ttl if type(ttl) is int else None
        started = await self._host.start(ctx, tool, arguments, call_next, policy, wished)
        return wire.creation(started) if isinstance(started, TaskRecord) else started

    # ------------------------------------------------------------------ tasks/*

    async def _get(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        host = self._host
        return wire.task(await host.lookup(host.service_of(ctx), ctx, params))

    async def _list(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        host = self._host
        store = host.service_of(ctx).store
        if not isinstance(store, ListingStore):
            raise MethodNotFound("Method not found: tasks/list (this task store cannot list)")
        principal = host.principal(ctx)
        cursor = params.get("cursor")
        after = None
        if cursor is not None:
            after = wire.decode_cursor(principal, cursor) if isinstance(cursor, str) else None
            if after is None:
                raise InvalidParams("Invalid cursor")
        size = host.list_page_size
        found = await store.list_tasks(principal, after, size + 1, host.now_ms())
        result: dict[str, Any] = {"tasks": [wire.task(record) for record in found[:size]]}
        if len(found) > size:
            result["nextCursor"] = wire.encode_cursor(principal, found[size - 1].task_id)
        return result

    async def _cancel(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """Cancel as the 2026-07-28 ``tasks/cancel`` does (the task's scope, where it runs),
        and answer the task; one that has ended already is -32602."""
        host = self._host
        run = host.service_of(ctx)
        record = await host.lookup(run, ctx, params)
        require_tool_scopes(run, ctx, record)
        if record.terminal:
            raise InvalidParams(f"Task is already {wire.status_of(record)}")
        await run.forwarder.cancel(record.task_id, record.owner)
        after = await run.store.get(record.task_id)
        return wire.task(after if after is not None else record)

    async def _result(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """The task's outcome once it has ended: its result with the related-task
        ``_meta``, or the error the call would have answered."""
        host = self._host
        run = host.service_of(ctx)
        record = await host.lookup(run, ctx, params)
        if not record.terminal:
            record = await self._wait(ctx, run, record)
        if record.status is Status.COMPLETED and record.result is not None:
            return wire.payload(record.result, record.task_id)
        if record.status is Status.FAILED and record.error is not None:
            raise TaskFailed(record.error)
        raise InternalError(
            "The task was cancelled before it finished",
            {"taskId": record.task_id, "status": record.status.value},
        )

    async def _wait(self, ctx: Context, run: TasksService, record: TaskRecord) -> TaskRecord:
        """Until the task ends. Each status it moves to is told to the client
        (``notifications/tasks/status``), and each question it asks is pushed to the client
        here. The wait is this request's: a ``notifications/cancelled`` or a client gone
        ends it, never the task. It is bounded by the task's TTL (then it has ended)."""
        host, task_id = self._host, record.task_id
        poll = MAX_POLL_SECONDS
        if record.poll_interval_ms is not None:
            poll = max(MIN_POLL_SECONDS, min(poll, record.poll_interval_ms / 1000))
        shown = wire.status_of(record)
        asked: set[str] = set()
        with trio.move_on_after(_wait_bound(record, host.now_ms())):
            async with trio.open_nursery() as nursery:
                while True:
                    status = wire.status_of(record)
                    if status != shown:
                        shown = status
                        await ctx.notify(_status_notification(record))
                    if record.terminal:
                        nursery.cancel_scope.cancel()  # questions still out: moot now
                        return record
                    fresh = {k: v for k, v in record.input_requests.items() if k not in asked}
                    if fresh:
                        asked.update(fresh)
                        nursery.start_soon(_ask, ctx, run, record, fresh)
                    await run.changes.wait(task_id, poll)
                    found = await host.find(run, ctx, task_id)
                    if found is None:  # expired (and reaped) while we waited
                        raise InvalidParams("Unknown or inaccessible taskId")
                    record = found
        raise InternalError("The task has not ended in time; call tasks/result again")


def _wait_bound(record: TaskRecord, now_ms: int) -> float:
    if record.ttl_ms is None:
        return UNLIMITED_WAIT_SECONDS
    left = (record.created_ms + record.ttl_ms - now_ms) / 1000
    return max(0.0, left) + EXPIRY_GRACE_SECONDS


def _status_notification(record: TaskRecord) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": wire.task(record)}


async def _ask(
    ctx: Context,
    run: TasksService,
    record: TaskRecord,
    requests: Mapping[str, Mapping[str, Any]],
) -> None:
    """Push the task's questions to the client on this request's stream (``ctx.input`` on a
    session), and deliver the answers where the task runs, as ``tasks/update`` does. A
    client that answers with an error, or not in time, fails this ``tasks/result`` (the
    task goes on waiting: a next ``tasks/result`` asks again)."""
    answers = await ctx.input(wire.with_related_task(requests, record.task_id))
    await run.forwarder.deliver(record.task_id, answers, record.owner)
