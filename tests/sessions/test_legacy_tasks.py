"""Tasks on 2025-11-25 sessions, in process: the ``tasks`` capability and each tool's
``execution.taskSupport``, a task-augmented ``tools/call``, ``tasks/get``, the blocking
``tasks/result`` (with the questions a task asks pushed on its stream), ``tasks/list`` in
pages scoped to the principal, ``tasks/cancel``, and the same tasks seen from 2026-07-28.
Every result is checked against the 2025-11-25 schema by the session client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from support.legacy_tasks_app import build

from presa_trio.ext.tasks import MemoryTaskStore, TaskLimits, TaskRecord
from presa_trio.testing import Client, RpcError, SessionClient, drive

RELATED = "io.modelcontextprotocol/related-task"
BOUND = 10.0  # seconds of real time for any one test's waits; each takes far less


class TenantSession(SessionClient):
    """A session client whose requests name their principal in ``Mcp-Tenant``."""

    def __init__(self, *args: Any, tenant: str = "ada", **options: Any) -> None:
        super().__init__(*args, **options)
        self.tenant = tenant

    def headers(self) -> list[tuple[str, str]]:
        return [*super().headers(), ("mcp-tenant", self.tenant)]


def say_ada(key: str, request: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.fixture
async def app() -> AsyncIterator[Any]:
    served = build(page_size=2).asgi_app()
    async with served.lifespan():
        yield served


async def opened(app: Any, tenant: str = "ada", **options: Any) -> TenantSession:
    session = TenantSession(app, tenant=tenant, answer=say_ada, **options)
    await session.initialize()
    return session


async def create(session: SessionClient, name: str, **task: Any) -> dict[str, Any]:
    result = await session.call_tool(name, {"a": 1, "b": 2} if name == "add" else {}, task=task)
    created: dict[str, Any] = result["task"]
    return created


# ---------------------------------------------------------------------------- negotiation


async def test_initialize_declares_tasks_and_tools_their_task_support(app: Any) -> None:
    session = await opened(app)
    assert session.initialize_result["capabilities"]["tasks"] == {
        "cancel": {},
        "requests": {"tools": {"call": {}}},
        "list": {},
    }
    support = {t["name"]: t.get("execution") for t in await session.list_tools()}
    assert support["add"] == {"taskSupport": "optional"}
    assert support["sleeper"] == {"taskSupport": "required"}
    assert support["plain"] is None  # absent: "forbidden"


async def test_a_2025_06_18_session_has_no_tasks(app: Any) -> None:
    session = await opened(app, version="2025-06-18")
    assert "tasks" not in session.initialize_result["capabilities"]
    assert all("execution" not in tool for tool in await session.list_tools())
    with pytest.raises(RpcError) as refused:
        await session.request("tasks/get", {"taskId": "x"})
    assert (refused.value.code, refused.value.status) == (-32601, 200)


async def test_a_store_that_cannot_list_declares_no_tasks_list() -> None:
    class Unlisted:  # a third-party store written before tasks/list: no list_tasks
        def __init__(self) -> None:
            self._inner = MemoryTaskStore()

        async def create(self, task: TaskRecord, limits: TaskLimits) -> None:
            await self._inner.create(task, limits)

        async def get(self, task_id: str) -> TaskRecord | None:
            return await self._inner.get(task_id)

        async def compare_and_set(self, task: TaskRecord, expected_revision: int) -> bool:
            return await self._inner.compare_and_set(task, expected_revision)

        async def delete_expired(self, now_ms: int) -> int:
            return await self._inner.delete_expired(now_ms)

        async def count(self) -> int:
            return await self._inner.count()

    app = build(store=Unlisted()).asgi_app()
    async with app.lifespan():
        session = await opened(app)
        assert "list" not in session.initialize_result["capabilities"]["tasks"]
        with pytest.raises(RpcError) as refused:
            await session.request("tasks/list", {})
        assert refused.value.code == -32601
        created = await create(session, "add")
        assert (await session.request("tasks/result", {"taskId": created["taskId"]}))[
            "structuredContent"
        ] == {"result": 3}


# ---------------------------------------------------------------------------- tools/call


async def test_a_task_augmented_call_creates_a_task(app: Any) -> None:
    session = await opened(app)
    created = await create(session, "add", ttl=60_000)
    assert set(created) == {
        "taskId",
        "status",
        "statusMessage",
        "createdAt",
        "lastUpdatedAt",
        "ttl",
        "pollInterval",
    }
    assert (created["status"], created["ttl"], created["pollInterval"]) == ("working", 60_000, 250)
    result = await session.request("tasks/result", {"taskId": created["taskId"]})
    assert result["structuredContent"] == {"result": 3}
    assert result["_meta"] == {RELATED: {"taskId": created["taskId"]}}
    task = await session.request("tasks/get", {"taskId": created["taskId"]})
    assert task["status"] == "completed" and task["taskId"] == created["taskId"]
    assert "_meta" not in task


async def test_a_ttl_past_the_servers_is_cut_to_it(app: Any) -> None:
    session = await opened(app)
    assert (await create(session, "add", ttl=10**10))["ttl"] == 3_600_000
    assert (await create(session, "add"))["ttl"] == 3_600_000


async def test_an_optional_tool_without_task_runs_directly(app: Any) -> None:
    session = await opened(app)
    result = await session.call_tool("add", {"a": 2, "b": 2})
    assert result["structuredContent"] == {"result": 4}


async def test_task_support_is_enforced_both_ways_with_32601(app: Any) -> None:
    session = await opened(app)
    with pytest.raises(RpcError) as required:
        await session.call_tool("sleeper", {})
    assert (required.value.code, required.value.status) == (-32601, 200)
    with pytest.raises(RpcError) as forbidden:
        await session.call_tool("plain", {}, task={})
    assert (forbidden.value.code, forbidden.value.status) == (-32601, 200)


# ---------------------------------------------------------------------------- tasks/result


async def test_tasks_result_blocks_until_the_end_and_tells_each_status(app: Any) -> None:
    session = await opened(app)
    created = await create(session, "sleeper")
    task_id = created["taskId"]
    got: dict[str, Any] = {}

    async def wait_result() -> None:
        with pytest.raises(RpcError) as ended:
            await session.request("tasks/result", {"taskId": task_id})
        got["error"] = ended.value

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_result)
            await trio.testing.wait_all_tasks_blocked()
            assert not got  # still waiting
            other = await opened(app)
            cancelled = await other.request("tasks/cancel", {"taskId": task_id})
            assert cancelled["status"] == "cancelled"
    assert (got["error"].code, got["error"].data) == (
        -32603,
        {"taskId": task_id, "status": "cancelled"},
    )
    statuses = [
        n["params"]["status"]
        for n in session.notifications
        if n["method"] == "notifications/tasks/status"
    ]
    assert statuses == ["cancelled"]


async def test_a_failed_task_answers_its_error(app: Any) -> None:
    session = await opened(app)
    created = await create(session, "boom")
    with pytest.raises(RpcError) as failed:
        await session.request("tasks/result", {"taskId": created["taskId"]})
    assert (failed.value.code, failed.value.message, failed.value.status) == (-32603, "boom", 200)
    task = await session.request("tasks/get", {"taskId": created["taskId"]})
    assert (task["status"], task["statusMessage"]) == ("failed", "boom")


async def test_a_question_is_pushed_on_the_result_stream_and_answered(app: Any) -> None:
    seen: list[dict[str, Any]] = []

    def answer(key: str, request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return say_ada(key, request)

    session = await opened(app)
    session.answer = answer
    created = await create(session, "greet")
    with trio.fail_after(BOUND):
        result = await session.request("tasks/result", {"taskId": created["taskId"]})
    assert result["content"][0]["text"].startswith("Hello, Ada!")
    assert [r["method"] for r in seen] == ["elicitation/create"]
    assert seen[0]["params"]["_meta"] == {RELATED: {"taskId": created["taskId"]}}
    statuses = [n["params"]["status"] for n in session.notifications]
    assert statuses[-1] == "completed"  # (the ones before depend on when the wait began)


async def test_a_cancelled_wait_leaves_the_task_running(app: Any) -> None:
    session = await opened(app)
    task_id = (await create(session, "sleeper"))["taskId"]
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 99, "method": "tasks/result", "params": {"taskId": task_id}}
    )
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            answered: list[Any] = []

            async def wait() -> None:
                answered.append(await drive(app, body, session.headers()))

            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert await session.notify("notifications/cancelled", {"requestId": 99}) == 202
    assert answered[0].messages[-1]["error"]["code"] == -32800
    assert (await session.request("tasks/get", {"taskId": task_id}))["status"] == "working"
    await session.request("tasks/cancel", {"taskId": task_id})


# ---------------------------------------------------------------------------- cancel


async def test_cancel_answers_the_cancelled_task_and_refuses_a_second(app: Any) -> None:
    session = await opened(app)
    task_id = (await create(session, "sleeper"))["taskId"]
    cancelled = await session.request("tasks/cancel", {"taskId": task_id})
    assert (cancelled["taskId"], cancelled["status"]) == (task_id, "cancelled")
    with pytest.raises(RpcError) as again:
        await session.request("tasks/cancel", {"taskId": task_id})
    assert (again.value.code, again.value.status) == (-32602, 200)
    done = (await create(session, "add"))["taskId"]
    await session.request("tasks/result", {"taskId": done})
    with pytest.raises(RpcError) as finished:
        await session.request("tasks/cancel", {"taskId": done})
    assert finished.value.code == -32602


# ---------------------------------------------------------------------------- list


async def test_tasks_list_pages_through_the_principals_tasks(app: Any) -> None:
    session = await opened(app)
    ids = {(await create(session, "add"))["taskId"] for _ in range(3)}
    first = await session.request("tasks/list", {})
    assert len(first["tasks"]) == 2 and "nextCursor" in first
    second = await session.request("tasks/list", {"cursor": first["nextCursor"]})
    assert len(second["tasks"]) == 1 and "nextCursor" not in second
    assert {t["taskId"] for t in first["tasks"] + second["tasks"]} == ids
    eve = await opened(app, tenant="eve")
    assert (await eve.request("tasks/list", {})) == {"tasks": []}
    with pytest.raises(RpcError) as foreign:  # ada's cursor, from eve
        await eve.request("tasks/list", {"cursor": first["nextCursor"]})
    assert (foreign.value.code, foreign.value.status) == (-32602, 200)


@pytest.mark.parametrize("edit", ["flip", "junk", "empty", "no tag", "other id"])
async def test_a_tampered_cursor_is_32602(app: Any, edit: str) -> None:
    session = await opened(app)
    for _ in range(3):
        await create(session, "add")
    cursor: str = (await session.request("tasks/list", {}))["nextCursor"]
    body, _, tag = cursor.partition(".")
    tampered = {
        "flip": body + "." + ("A" if tag[0] != "A" else "B") + tag[1:],
        "junk": "not a cursor at all",
        "empty": "",
        "no tag": body,
        "other id": "WzEsInp6eiJd." + tag,  # [1,"zzz"] with the original's tag
    }[edit]
    with pytest.raises(RpcError) as refused:
        await session.request("tasks/list", {"cursor": tampered})
    assert refused.value.code == -32602


# ---------------------------------------------------------------------------- foreign ids


async def test_another_principals_task_is_indistinguishable_from_unknown(app: Any) -> None:
    ada = await opened(app)
    task_id = (await create(ada, "sleeper"))["taskId"]
    eve = await opened(app, tenant="eve")
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        errors = []
        for asked in (task_id, "no-such-task"):
            with pytest.raises(RpcError) as refused:
                await eve.request(method, {"taskId": asked})
            errors.append((refused.value.code, refused.value.message, refused.value.status))
        assert errors[0] == errors[1] == (-32602, "Unknown or inaccessible taskId", 200)
    assert (await ada.request("tasks/get", {"taskId": task_id}))["status"] == "working"
    await ada.request("tasks/cancel", {"taskId": task_id})


# ---------------------------------------------------------------------------- both eras


async def test_one_task_store_serves_both_eras(app: Any) -> None:
    session = await opened(app, tenant="nobody")  # the 2026-07-28 client names no tenant
    modern = Client(app)
    old_task = (await create(session, "sleeper"))["taskId"]
    seen = await modern.get_task(old_task)
    assert (seen["taskId"], seen["status"], seen["ttlMs"]) == (old_task, "working", 3_600_000)
    new_task = await modern.create_task("sleeper")
    listed = {t["taskId"] for t in (await session.request("tasks/list", {}))["tasks"]}
    assert {old_task, new_task} <= listed
    assert (await session.request("tasks/cancel", {"taskId": new_task}))["status"] == "cancelled"
    assert (await modern.get_task(new_task))["status"] == "cancelled"
    await modern.cancel_task(old_task)
    assert (await session.request("tasks/get", {"taskId": old_task}))["status"] == "cancelled"


async def test_an_old_era_tasks_question_can_be_answered_with_tasks_update(app: Any) -> None:
    session = await opened(app, tenant="nobody")
    modern = Client(app)
    task_id = (await create(session, "greet"))["taskId"]
    with trio.fail_after(BOUND):
        parked = await modern.wait_task(task_id, ("input_required",))
        (key,) = parked["inputRequests"]
        await modern.update_task(task_id, {key: say_ada(key, parked["inputRequests"][key])})
        result = await session.request("tasks/result", {"taskId": task_id})
    assert result["content"][0]["text"].startswith("Hello, Ada!")
