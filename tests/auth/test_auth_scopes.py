"""What a verified token decides past the edge: the scopes a tool declares (403
``insufficient_scope`` over HTTP, nothing on stdio), the principal (the token's subject by
default) that binds tasks and MRTR ``requestState``, and the tasks of a scoped tool.

In process, through the ASGI app (and once through stdio); the verifier is a table.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio import Context, Server, Validation, serve_stdio
from presa_trio.auth import AccessToken, BearerAuth
from presa_trio.ext.tasks import EXTENSION_ID, TasksExtension
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, RpcError, open_client

RESOURCE = "https://mcp.example.com/mcp"
METADATA_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
WITH_TASKS = {"elicitation": {}, "extensions": {EXTENSION_ID: {}}}
UNKNOWN = {"code": -32602, "message": "Unknown or inaccessible taskId"}
TOKENS = {
    "alice-read": AccessToken(subject="alice", scopes=frozenset({"read"})),
    "alice-deploy": AccessToken(subject="alice", scopes=frozenset({"read", "deploy"})),
    "alice-admin": AccessToken(subject="alice", scopes=frozenset({"admin"})),
    "bob-deploy": AccessToken(subject="bob", scopes=frozenset({"read", "deploy"})),
    "robot": AccessToken(client_id="ci-bot", scopes=frozenset({"deploy"})),
}


class Table:
    async def verify(self, token: str) -> AccessToken | None:
        await trio.lowlevel.checkpoint()
        return TOKENS.get(token)


def bearer(**options: Any) -> BearerAuth:
    return BearerAuth(
        Table(),
        resource=RESOURCE,
        authorization_servers=["https://auth.example.com"],
        scope_hierarchy={"admin": ["deploy", "read"]},
        **options,
    )


def build(auth: BearerAuth | None = None, **server_options: Any) -> Server:
    server = Server(
        "scoped", "1", validation=Validation(outbound=True), auth=auth, **server_options
    )
    server.add_extension(TasksExtension())

    @server.tool(scopes=["deploy"])
    def deploy(ctx: Context, service: str = "web") -> str:
        """Deploys, for whoever holds the deploy scope."""
        return f"{service} deployed by {ctx.principal or 'nobody'}"

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Who is asking."""
        token = ctx.access_token
        return f"{ctx.principal!r} {token.subject if token is not None else None!r}"

    @server.tool(scopes=["deploy"], options={"tasks": "required"})
    async def rollout(ctx: Context) -> str:
        """A long rollout that asks for a go-ahead."""
        answer = await ctx.input({"go": elicit("Go?", {"ok": {"type": "boolean"}})})
        return f"rolled out: {answer['go']['content']['ok']}"

    @server.tool()
    async def confirm(ctx: Context) -> str:
        """Asks before answering (MRTR)."""
        answer = await ctx.input({"sure": elicit("Sure?", {"ok": {"type": "boolean"}})})
        return f"confirmed: {answer['sure']['content']['ok']}"

    @server.tool()
    async def late_check(ctx: Context) -> str:
        """Checks a scope only after its response has become a stream."""
        await ctx.progress(1, 2)
        ctx.require_scopes("audit")
        return "unreachable without audit"

    return server


def text(result: dict[str, Any]) -> str:
    found: str = result["content"][0]["text"]
    return found


async def refused(client: Client, method: str, params: dict[str, Any]) -> Any:
    """The HTTP answer to a request that must fail: (status, challenge, error)."""
    result = await client.send(client.message(method, params))
    assert result.response is not None and "error" in result.response, result
    return result.status, result.headers.get("www-authenticate"), result.response["error"]


def insufficient(*scopes: str, metadata: bool = True) -> tuple[int, str, dict[str, Any]]:
    challenge = f'Bearer error="insufficient_scope", scope="{" ".join(scopes)}"'
    if metadata:
        challenge += f', resource_metadata="{METADATA_URL}"'
    error = {
        "code": -32600,
        "message": f"Forbidden: insufficient scope (this operation needs: {' '.join(scopes)})",
        "data": {"requiredScopes": list(scopes)},
    }
    return 403, challenge, error


# ---------------------------------------------------------------------- tools


async def test_a_scoped_tool_needs_its_scope() -> None:
    async with open_client(build(bearer()), token="alice-read") as client:
        assert await refused(client, "tools/call", {"name": "deploy"}) == insufficient("deploy")
        client.token = "alice-deploy"
        assert text(await client.call_tool("deploy")) == "web deployed by alice"
        client.token = "alice-admin"  # a broader scope implies it
        assert text(await client.call_tool("deploy", {"service": "api"})) == (
            "api deployed by alice"
        )


async def test_the_challenge_names_the_required_scopes_with_the_tools() -> None:
    async with open_client(build(bearer(required_scopes=["read"])), token="alice-read") as c:
        assert await refused(c, "tools/call", {"name": "deploy"}) == insufficient("read", "deploy")


async def test_the_scope_is_checked_before_the_arguments() -> None:
    async with open_client(build(bearer()), token="alice-read") as client:
        params = {"name": "deploy", "arguments": {"service": 42}}
        assert await refused(client, "tools/call", params) == insufficient("deploy")


async def test_every_caller_sees_every_tool() -> None:
    async with open_client(build(bearer()), token="alice-read") as client:
        names = [tool["name"] for tool in await client.list_tools()]
    assert "deploy" in names and "rollout" in names


async def test_a_client_only_token_is_its_client() -> None:
    async with open_client(build(bearer()), token="robot") as client:
        assert text(await client.call_tool("deploy")) == "web deployed by client:ci-bot"


async def test_a_principal_function_still_decides_and_sees_the_token() -> None:
    def principal(ctx: Context) -> str:
        token = ctx.access_token
        return f"{token.issuer}|{token.subject}" if token is not None else "?"

    async with open_client(build(bearer(), principal=principal), token="alice-read") as client:
        assert text(await client.call_tool("whoami")) == "'None|alice' 'alice'"


async def test_a_scope_checked_after_streaming_began_fails_in_band() -> None:
    async with open_client(build(bearer()), token="alice-deploy") as client:
        message = client.message("tools/call", {"name": "late_check"}, meta={"progressToken": 1})
        result = await client.send(message)
    assert result.status == 200
    assert result.headers["content-type"] == "text/event-stream"
    assert result.response is not None
    assert result.response["error"] == insufficient("audit")[2]


async def test_an_app_without_auth_refuses_scoped_tools() -> None:
    async with open_client(build()) as client:
        assert await refused(client, "tools/call", {"name": "deploy"}) == insufficient(
            "deploy", metadata=False
        )
        assert text(await client.call_tool("whoami")) == "'' None"


async def test_auth_on_the_app_overrides_the_servers() -> None:
    app = build().asgi_app(auth=bearer())
    async with open_client(app, token="alice-deploy") as client:
        assert text(await client.call_tool("deploy")) == "web deployed by alice"
        client.token = None
        result = await client.send(client.message("tools/call", {"name": "deploy"}))
        assert result.status == 401


async def test_stdio_serves_a_server_with_auth_and_checks_no_scope() -> None:
    server = build(bearer())
    to_server, stdin = trio.testing.memory_stream_one_way_pair()
    stdout, from_server = trio.testing.memory_stream_one_way_pair()
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    lines = b""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: serve_stdio(server, stdin=stdin, stdout=stdout))
        for request_id, name in ((1, "deploy"), (2, "whoami")):
            params = {"name": name, "arguments": {}, "_meta": meta}
            message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
            await to_server.send_all(json.dumps(message).encode() + b"\n")
        while lines.count(b"\n") < 2:
            lines += await from_server.receive_some()
        await to_server.aclose()
    answers = {m["id"]: m["result"] for m in map(json.loads, lines.splitlines())}
    assert text(answers[1]) == "web deployed by nobody"
    assert text(answers[2]) == "'' None"


# ---------------------------------------------------------------------- principals


async def test_another_principals_task_is_an_unknown_task() -> None:
    async with open_client(build(bearer()), token="alice-deploy", capabilities=WITH_TASKS) as c:
        task_id = await c.create_task("rollout")
        await trio.testing.wait_all_tasks_blocked()
        assert (await c.get_task(task_id))["status"] == "input_required"

        c.token = "bob-deploy"  # the same scopes, another subject
        seen = set()
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            for target in (task_id, secrets.token_urlsafe(24)):
                params: dict[str, Any] = {"taskId": target}
                if method == "tasks/update":
                    params["inputResponses"] = {"go": {"action": "accept", "content": {"ok": 1}}}
                result = await c.send(c.message(method, params))
                assert result.response is not None
                seen.add((result.status, json.dumps(result.response["error"], sort_keys=True)))
        assert seen == {(400, json.dumps(UNKNOWN, sort_keys=True))}

        c.token = "alice-admin"  # another token of alice's: her task is still hers
        assert (await c.get_task(task_id))["status"] == "input_required"


async def test_a_scoped_tools_task_is_steered_only_with_the_scope() -> None:
    async with open_client(build(bearer()), token="alice-deploy", capabilities=WITH_TASKS) as c:
        task_id = await c.create_task("rollout")
        await trio.testing.wait_all_tasks_blocked()

        c.token = "alice-read"  # alice, without the deploy scope any more
        assert (await c.get_task(task_id))["status"] == "input_required"
        go = {"go": {"action": "accept", "content": {"ok": True}}}
        params = {"taskId": task_id, "inputResponses": go}
        assert await refused(c, "tasks/update", params) == insufficient("deploy")
        assert await refused(c, "tasks/cancel", {"taskId": task_id}) == insufficient("deploy")
        assert (await c.get_task(task_id))["status"] == "input_required"

        c.token = "alice-deploy"
        assert await c.update_task(task_id, go) == {"resultType": "complete"} | {
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scoped", "version": "1"}}
        }
        with trio.fail_after(5):
            done = await c.wait_task(task_id)
        assert done["status"] == "completed"
        assert text(done["result"]) == "rolled out: True"


async def test_a_scoped_tool_without_the_scope_makes_no_task() -> None:
    async with open_client(build(bearer()), token="alice-read", capabilities=WITH_TASKS) as c:
        with pytest.raises(RpcError) as caught:
            await c.create_task("rollout")
        assert (caught.value.status, caught.value.data) == (403, {"requiredScopes": ["deploy"]})
        assert c.app.runtime is not None
        assert len(c.app.runtime.service(EXTENSION_ID).store._tasks) == 0


async def test_request_state_is_bound_to_the_tokens_subject() -> None:
    async with open_client(build(bearer()), token="alice-read") as client:
        first = await client.call_tool("confirm")
        assert first["resultType"] == "input_required"
        sure = {"sure": {"action": "accept", "content": {"ok": True}}}
        params = {"name": "confirm", "inputResponses": sure, "requestState": first["requestState"]}

        client.token = "bob-deploy"
        status, challenge, error = await refused(client, "tools/call", params)
        assert (status, challenge) == (400, None)
        assert error == {"code": -32602, "message": "requestState failed verification"}

        client.token = "alice-admin"  # another token, the same subject
        done = await client.request("tools/call", params)
        assert text(done) == "confirmed: True"


@pytest.mark.parametrize("scopes", ["deploy", ["two words"], ['q"uote'], [""]])
def test_a_tool_declares_scope_tokens(scopes: Any) -> None:
    server = Server("declaring")
    with pytest.raises(ValueError):

        @server.tool(scopes=scopes)
        def tool() -> str:
            """Never declared."""
            return ""

    assert not server.registry.tools
