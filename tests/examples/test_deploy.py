"""examples/deploy.py: a deploy tool behind bearer auth that runs as a task, parks on a
confirmation answered with tasks/update, and whose task no other principal can see."""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio
from joserfc import jwk, jwt

from presa_trio.testing import Client, RpcError, open_client

ISSUER = "https://auth.example.test"
RESOURCE = "http://127.0.0.1:8000/mcp"
KEY = jwk.ECKey.generate_key("P-256", auto_kid=True)


def token(subject: str, scope: str) -> str:
    claims = {
        "iss": ISSUER,
        "sub": subject,
        "aud": RESOURCE,
        "exp": int(time.time()) + 300,
        "scope": scope,
    }
    return jwt.encode({"alg": "ES256", "kid": KEY.kid}, claims, KEY, algorithms=["ES256"])


@pytest.fixture
def deploy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    keys = tmp_path / "jwks.json"
    keys.write_text(json.dumps(jwk.KeySet([KEY]).as_dict(private=False)))
    monkeypatch.setenv("DEPLOY_ISSUER", ISSUER)
    monkeypatch.setenv("DEPLOY_RESOURCE", RESOURCE)
    monkeypatch.setenv("DEPLOY_JWKS", str(keys))
    sys.modules.pop("examples.deploy", None)  # it reads its configuration when imported
    yield importlib.import_module("examples.deploy")
    sys.modules.pop("examples.deploy", None)


ARGUMENTS = {"service": "api", "version": "2.0.1", "environment": "production"}


async def parked(client: Client, task_id: str) -> dict[str, Any]:
    with trio.fail_after(5):
        return await client.wait_task(task_id, ("input_required",))


async def test_a_confirmed_deploy_runs_to_its_structured_report(deploy: ModuleType) -> None:
    async with open_client(deploy.server, token=token("ada", "deploy status")) as client:
        task_id = await client.create_task("deploy", ARGUMENTS)
        question = (await parked(client, task_id))["inputRequests"]["confirm"]
        assert question["method"] == "elicitation/create"
        assert question["params"]["message"] == "Deploy api 2.0.1 to production?"
        await client.update_task(
            task_id, {"confirm": {"action": "accept", "content": {"confirm": True}}}
        )
        with trio.fail_after(5):
            done = await client.wait_task(task_id)
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {
        "service": "api",
        "version": "2.0.1",
        "environment": "production",
        "outcome": "deployed",
        "by": "ada",
        "steps": ["build", "push", "migrate", "switch traffic"],
    }


async def test_a_declined_deploy_touches_nothing(deploy: ModuleType) -> None:
    async with open_client(deploy.server, token=token("ada", "deploy")) as client:
        task_id = await client.create_task("deploy", {"service": "api", "version": "2.0.1"})
        await parked(client, task_id)
        await client.update_task(task_id, {"confirm": {"action": "decline"}})
        with trio.fail_after(5):
            done = await client.wait_task(task_id)
    report = done["result"]["structuredContent"]
    assert (report["environment"], report["outcome"], report["steps"]) == (
        "staging",
        "declined",
        [],
    )


async def test_tokens_and_scopes_are_checked_and_tasks_are_private(deploy: ModuleType) -> None:
    async with open_client(deploy.app) as client:
        call = client.message("tools/call", {"name": "deploy", "arguments": ARGUMENTS})
        refused = await client.send(call)
        assert refused.status == 401
        metadata = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
        assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata}"'

        client.token = token("ada", "status")
        status = await client.call_tool("status", {"service": "api"})
        assert status["content"] == [
            {"type": "text", "text": "api: staging 1.4.2, production 1.4.1"}
        ]
        assert (await client.send(call)).status == 403  # no deploy scope

        client.token = token("ada", "deploy")
        task_id = await client.create_task("deploy", ARGUMENTS)
        await parked(client, task_id)

        client.token = token("bob", "deploy")  # another principal: the task is not there
        with pytest.raises(RpcError) as unknown:
            await client.get_task(task_id)
        assert unknown.value.code == -32602
        with pytest.raises(RpcError) as cancelled:
            await client.cancel_task(task_id)
        assert cancelled.value.code == -32602

        client.token = token("ada", "deploy")
        assert (await client.cancel_task(task_id))["resultType"] == "complete"
        assert (await client.get_task(task_id))["status"] == "cancelled"
