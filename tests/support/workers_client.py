"""A client for ``workers_app`` running under real hypercorn processes: every request on a
new connection, as behind a load balancer; what the tools recorded, read from their files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from support.live_http import mcp_request, request
from support.servers import ROOT, Served

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
YES = {"action": "accept", "content": {"go": True}}
LEASE = 2.0
HERE = ROOT / "tests" / "support"


class Cluster:
    """One server (one or several hypercorn workers) seen from outside."""

    def __init__(self, served: Served, records: Path) -> None:
        self.served = served
        self.port = served.port
        self.records = records

    async def rpc(self, method: str, params: dict[str, Any], name: str | None = None) -> Any:
        """One request on a new connection; the JSON-RPC result (errors fail the test)."""
        body, headers = mcp_request(method, params, capabilities=TASKS)
        if name is not None:
            headers.append(("mcp-name", name))
        response = await request(self.port, body, headers)
        final = response.messages[-1]
        assert "result" in final, (response.status, final)
        return final["result"]

    async def task(self, method: str, task_id: str, **params: Any) -> Any:
        return await self.rpc(method, {"taskId": task_id, **params}, task_id)

    async def create(self, tool: str, tag: str) -> str:
        created = await self.rpc("tools/call", {"name": tool, "arguments": {"tag": tag}})
        assert created["resultType"] == "task", created
        task_id: str = created["taskId"]
        return task_id

    async def until(self, task_id: str, *statuses: str, within: float = 10) -> Any:
        with trio.fail_after(within):
            while True:
                task = await self.task("tasks/get", task_id)
                if task["status"] in statuses:
                    return task
                await trio.sleep(0.02)

    def pid_of(self, tag: str) -> int:
        return int((self.records / f"{tag}.pid").read_text())

    async def pids(self, calls: int = 30) -> set[int]:
        return {await self.whoami() for _ in range(calls)}

    async def whoami(self) -> int:
        answer = await self.rpc("tools/call", {"name": "whoami", "arguments": {}})
        pid: int = json.loads(answer["content"][0]["text"])["pid"]
        return pid


async def warm(cluster: Cluster, workers: int = 3) -> None:
    """Until every worker answers (each opens its backend at its own pace)."""
    with trio.fail_after(30):
        while len(await cluster.pids(10)) < workers:  # noqa: ASYNC110
            await trio.sleep(0.1)


async def park_and_run(cluster: Cluster, prefix: str) -> dict[int, dict[str, str]]:
    """Tasks until one worker (pid) both runs a sleeper and parks an asker: pid -> tool ->
    task id."""
    tags: dict[int, dict[str, str]] = {}
    with trio.fail_after(30):
        n = 0
        while not any(len(kinds) == 2 for kinds in tags.values()):
            n += 1
            for tool in ("sleeper", "asker"):
                tag = f"{prefix}{tool}{n}"
                task_id = await cluster.create(tool, tag)
                if tool == "asker":
                    await cluster.until(task_id, "input_required")
                tags.setdefault(cluster.pid_of(tag), {})[tool] = task_id
    return tags


LOST = {"code": -32603, "message": "The worker running this task was lost"}
