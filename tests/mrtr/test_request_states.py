"""``requestState`` through the app: a genuine state completes (also on an instance sharing the
keys); forged, reused and expired states are refused; one too large to issue is an internal
error, a small one is issued and verified. (Sealing on its own:
tests/unit/test_request_state.py.)"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import pytest
from support.answers import only_error
from support.task_service import client_name

from fixtures.conformance import build_server
from presa_trio import Context, KeyRing, RequestState, Server, Validation
from presa_trio.mrtr import elicit
from presa_trio.testing import Client, open_client

STATE_TOOL = "test_input_required_result_request_state"
CONFIRMED = {"confirm": {"action": "accept", "content": {"ok": True}}}
REFUSED = {"code": -32602, "message": "requestState failed verification"}


async def issued(client: Client, arguments: dict[str, Any] | None = None) -> str:
    first = await client.call_tool(STATE_TOOL, arguments)
    assert first["resultType"] == "input_required"
    token: str = first["requestState"]
    return token


async def assert_refused(client: Client, method: str, params: dict[str, Any]) -> None:
    result = await client.send(client.message(method, params))
    assert result.status == 400, result.body
    assert result.response is not None and result.response["error"] == REFUSED


def retry(token: str, name: str = STATE_TOOL, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputResponses": CONFIRMED, "requestState": token, **extra}


async def test_a_genuine_request_state_completes() -> None:
    async with open_client(build_server(principal=client_name)) as client:
        token = await issued(client, {"a": 1})
        done = await client.request("tools/call", retry(token, arguments={"a": 1}))
        assert done["content"] == [{"type": "text", "text": "state-ok: confirmed=True"}]


async def test_forged_request_states_are_refused() -> None:
    """A random string, every single-character change of a real token, and a token of
    another server instance (other keys) are all refused with -32602."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
    async with (
        open_client(build_server()) as client,
        open_client(build_server()) as elsewhere,
    ):
        token = await issued(client)
        for forged in ("", "s1", secrets.token_urlsafe(96), "s1.k0.e30." + "A" * 43):
            await assert_refused(client, "tools/call", retry(forged))
        for at, char in enumerate(token):
            swap = alphabet[(alphabet.index(char) + 1) % len(alphabet)]
            await assert_refused(client, "tools/call", retry(token[:at] + swap + token[at + 1 :]))
        foreign = await issued(elsewhere)
        await assert_refused(client, "tools/call", retry(foreign))
        # The same token is good where it was issued: the refusal is about the keys.
        done = await elsewhere.request("tools/call", retry(foreign))
        assert done["content"][0]["text"] == "state-ok: confirmed=True"


async def test_a_token_of_an_instance_sharing_the_keys_verifies() -> None:
    keys = [("shared", b"k" * 32)]
    async with (
        open_client(build_server(request_state=RequestState(keys=KeyRing(keys)))) as one,
        open_client(build_server(request_state=RequestState(keys=KeyRing(keys)))) as two,
    ):
        token = await issued(one)
        assert (await two.request("tools/call", retry(token)))["resultType"] == "complete"


@pytest.mark.parametrize("reuse", ["other tool", "other arguments", "other principal", "prompt"])
async def test_request_state_reused_elsewhere_is_refused(reuse: str) -> None:
    async with open_client(build_server(principal=client_name)) as client:
        client.client_info = {"name": "alice", "version": "1"}
        token = await issued(client, {"a": 1})
        if reuse == "other tool":
            params = retry(token, "test_input_required_result_tampered_state", arguments={"a": 1})
            await assert_refused(client, "tools/call", params)
        elif reuse == "other arguments":
            await assert_refused(client, "tools/call", retry(token, arguments={"a": 2}))
        elif reuse == "other principal":
            client.client_info = {"name": "bob", "version": "1"}
            await assert_refused(client, "tools/call", retry(token, arguments={"a": 1}))
        else:
            params = {
                "name": "test_input_required_result_prompt",
                "inputResponses": {
                    "user_context": {"action": "accept", "content": {"context": "x"}}
                },
                "requestState": token,
            }
            await assert_refused(client, "prompts/get", params)
        client.client_info = {"name": "alice", "version": "1"}  # still good where it belongs
        done = await client.request("tools/call", retry(token, arguments={"a": 1}))
        assert done["resultType"] == "complete"


async def test_an_expired_request_state_is_refused() -> None:
    async with open_client(build_server(request_state=RequestState(ttl=-1))) as client:
        token = await issued(client)
        await assert_refused(client, "tools/call", retry(token))


ALICE = {"action": "accept", "content": {"name": "Alice"}}


def state_server(state: Mapping[str, Any]) -> Server:
    server = Server(
        "state",
        "1",
        validation=Validation(outbound=True),
        request_state=RequestState(max_bytes=65536),
        loop_warning=None,
    )

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Asks a question, keeping ``state`` for the retry."""
        answer = await ctx.input(
            {"q": elicit("Name?", {"name": {"type": "string"}}, ["name"])}, state=dict(state)
        )
        return f"{answer['q']['content']['name']} {sorted(ctx.state or {})}"

    return server


@pytest.mark.parametrize(
    "state", [{"blob": "x" * 100_000}, {"n": float("nan")}], ids=["too-large", "nan"]
)
async def test_a_request_state_that_cannot_be_issued_is_an_internal_error(
    state: dict[str, Any],
) -> None:
    async with open_client(state_server(state), capabilities={"elicitation": {}}) as client:
        message = client.message("tools/call", {"name": "ask", "arguments": {}})
        result = await client.send(message)
        assert result.status == 500
        error = only_error(result)
        assert error["code"] == -32603
        assert "requestState" in error["message"]
        assert b'requestState":' not in result.body  # nothing issued
        assert b"input_required" not in result.body


async def test_a_small_request_state_is_issued_and_verified() -> None:
    async with open_client(state_server({"k": "v" * 100}), capabilities={"elicitation": {}}) as c:
        first = await c.call_tool("ask", {})
        assert first["resultType"] == "input_required"
        assert isinstance(first["requestState"], str)
        assert len(first["requestState"]) <= 65536
        done = await c.call_tool(
            "ask", {}, input_responses={"q": ALICE}, request_state=first["requestState"]
        )
        assert done["content"] == [{"type": "text", "text": "Alice ['k']"}]
