"""Multi round-trip requests end to end through the ASGI app (wire §10)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from fixtures.conformance import build_server
from presa_trio import Context, RequestState, Server
from presa_trio._protocol.request_state import KeyRing
from presa_trio.mrtr import elicit, sample
from presa_trio.testing import Client, RpcError, open_client

ALICE = {"action": "accept", "content": {"name": "Alice"}}


def answer(key: str, request: Mapping[str, Any]) -> dict[str, Any]:
    method = request["method"]
    if method == "elicitation/create":
        properties = request["params"]["requestedSchema"]["properties"]
        values = {"name": "Alice", "color": "blue", "ok": True, "context": "ctx", "value": "v"}
        return {"action": "accept", "content": {k: values[k] for k in properties}}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}
    return {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}


async def test_first_round_is_input_required(client: Client) -> None:
    result = await client.call_tool("test_input_required_result_elicitation", {})
    assert result["resultType"] == "input_required"
    assert list(result["inputRequests"]) == ["user_name"]
    assert result["inputRequests"]["user_name"] == {
        "method": "elicitation/create",
        "params": {
            "message": "What is your name?",
            "requestedSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
    }
    assert isinstance(result["requestState"], str)
    assert "ttlMs" not in result and "cacheScope" not in result


async def test_answer_completes_with_or_without_state(client: Client) -> None:
    done = await client.call_tool("test_input_required_result_elicitation", {}, answer=answer)
    assert done["content"] == [{"type": "text", "text": "Hello, Alice!"}]
    bare = await client.call_tool(
        "test_input_required_result_elicitation",
        {},
        input_responses={"user_name": ALICE, "extra": ALICE},
    )
    assert bare["content"][0]["text"] == "Hello, Alice!"


async def test_missing_answer_asks_again(client: Client) -> None:
    again = await client.request(
        "tools/call",
        {
            "name": "test_input_required_result_elicitation",
            "arguments": {},
            "inputResponses": {"wrong_key": ALICE},
        },
    )
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["user_name"]


async def test_partial_answers_ask_only_for_the_rest(client: Client) -> None:
    first = await client.call_tool("test_input_required_result_multiple_inputs", {})
    assert list(first["inputRequests"]) == ["user_name", "greeting", "client_roots"]
    partial = await client.request(
        "tools/call",
        {
            "name": "test_input_required_result_multiple_inputs",
            "arguments": {},
            "inputResponses": {
                "user_name": ALICE,
                "client_roots": answer("client_roots", {"method": "roots/list"}),
            },
            "requestState": first["requestState"],
        },
    )
    assert list(partial["inputRequests"]) == ["greeting"]
    done = await client.call_tool("test_input_required_result_multiple_inputs", {}, answer=answer)
    assert done["content"][0]["text"] == "Name: Alice; Greeting: Paris; Roots: 1"


async def test_multi_round_states_differ(client: Client) -> None:
    states: list[str] = []

    def record(key: str, request: Mapping[str, Any]) -> dict[str, Any]:
        states.append(client.last.response["result"]["requestState"])  # type: ignore[index]
        return answer(key, request)

    done = await client.call_tool("test_input_required_result_multi_round", {}, answer=record)
    assert done["content"][0]["text"] == "Multi-round complete for Alice who likes blue"
    assert len(states) == 2 and states[0] != states[1]


@pytest.mark.parametrize(
    "responses",
    [
        None,
        {"user_name": 12345},
        {"user_name": "Alice"},
        {"user_name": [ALICE]},
        {"user_name": {"action": "maybe"}},
    ],
)
async def test_malformed_input_responses(client: Client, responses: Any) -> None:
    message = client.message(
        "tools/call",
        {
            "name": "test_input_required_result_elicitation",
            "arguments": {},
            "inputResponses": responses,
        },
    )
    client.validate = False  # the request itself is deliberately schema-invalid
    result = await client.send(message)
    assert result.status == 400
    assert result.response is not None and result.response["error"]["code"] == -32602


async def test_answer_of_the_wrong_kind(client: Client) -> None:
    sampling_answer = answer("x", {"method": "sampling/createMessage"})
    with pytest.raises(RpcError) as caught:
        await client.call_tool(
            "test_input_required_result_elicitation",
            {},
            input_responses={"user_name": sampling_answer},
        )
    assert caught.value.code == -32602


async def first_state(client: Client, tool: str) -> str:
    result = await client.call_tool(tool, {})
    state: str = result["requestState"]
    return state


async def retry(client: Client, tool: str, state: str) -> dict[str, Any]:
    return await client.request(
        "tools/call",
        {
            "name": tool,
            "arguments": {},
            "requestState": state,
            "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}},
        },
    )


TAMPERED = "test_input_required_result_tampered_state"


async def test_untampered_state_verifies(client: Client) -> None:
    done = await retry(client, TAMPERED, await first_state(client, TAMPERED))
    assert done["content"][0]["text"] == "integrity-ok: state verified"


@pytest.mark.parametrize("position", [0, 3, 10, 40, -20, -1])
async def test_one_flipped_character_is_refused(client: Client, position: int) -> None:
    state = await first_state(client, TAMPERED)
    chars = list(state)
    chars[position] = "A" if chars[position] != "A" else "B"
    with pytest.raises(RpcError) as caught:
        await retry(client, TAMPERED, "".join(chars))
    assert (caught.value.code, caught.value.status) == (-32602, 400)


async def test_appended_suffix_and_foreign_strings_are_refused(client: Client) -> None:
    state = await first_state(client, TAMPERED)
    for bad in (state + "-TAMPERED", "", "x", "s1.k0.e30.AAAA"):
        with pytest.raises(RpcError) as caught:
            await retry(client, TAMPERED, bad)
        assert caught.value.code == -32602


async def test_state_cannot_be_swapped_between_tools(client: Client) -> None:
    state = await first_state(client, "test_input_required_result_request_state")
    with pytest.raises(RpcError) as caught:
        await retry(client, TAMPERED, state)
    assert caught.value.code == -32602


async def test_state_is_bound_to_the_arguments() -> None:
    server = Server("bound")

    @server.tool()
    async def delete(ctx: Context, path: str) -> str:
        """Deletes after confirmation."""
        if ctx.state is None:
            await ctx.input(
                {"ok": elicit("Sure?", {"ok": {"type": "boolean"}})}, state={"path": path}
            )
        assert ctx.state is not None
        return f"deleted {ctx.state['path']}"

    async with open_client(server) as client:
        first = await client.call_tool("delete", {"path": "/tmp/a"})
        with pytest.raises(RpcError) as caught:
            await client.request(
                "tools/call",
                {
                    "name": "delete",
                    "arguments": {"path": "/etc"},
                    "requestState": first["requestState"],
                },
            )
        assert caught.value.code == -32602
        done = await client.request(
            "tools/call",
            {
                "name": "delete",
                "arguments": {"path": "/tmp/a"},
                "requestState": first["requestState"],
            },
        )
        assert done["content"][0]["text"] == "deleted /tmp/a"


async def test_expired_state_is_refused() -> None:
    server = build_server(request_state=RequestState(ttl=-1.0))  # every state is born expired
    async with open_client(server) as client:
        with pytest.raises(RpcError) as caught:
            await retry(client, TAMPERED, await first_state(client, TAMPERED))
        assert caught.value.code == -32602


async def test_key_rotation() -> None:
    old, new = ("old", b"o" * 32), ("new", b"n" * 32)
    issuing = build_server(request_state=RequestState(keys=KeyRing([old])))
    async with open_client(issuing) as client:
        state = await first_state(client, TAMPERED)
    rotated = build_server(
        request_state=RequestState(keys=KeyRing([new, old]))
    )  # new signs, old still verifies
    async with open_client(rotated) as client:
        assert (await retry(client, TAMPERED, state))["resultType"] == "complete"
        fresh = await first_state(client, TAMPERED)
        assert fresh.split(".")[1] == "new"
    retired = build_server(request_state=RequestState(keys=KeyRing([new])))
    async with open_client(retired) as client:
        with pytest.raises(RpcError) as caught:
            await retry(client, TAMPERED, state)
        assert caught.value.code == -32602
        assert (await retry(client, TAMPERED, fresh))["resultType"] == "complete"


async def test_capability_check_degrades_to_what_was_declared(client: Client) -> None:
    only_sampling = await client.call_tool(
        "test_input_required_result_capabilities", {}, capabilities={"sampling": {}}
    )
    assert only_sampling["resultType"] == "input_required"
    assert [r["method"] for r in only_sampling["inputRequests"].values()] == [
        "sampling/createMessage"
    ]
    none = await client.call_tool("test_input_required_result_capabilities", {}, capabilities={})
    assert none["content"][0]["text"] == "No supported capabilities declared"


async def test_asking_without_the_capability_is_32021(client: Client) -> None:
    with pytest.raises(RpcError) as caught:
        await client.call_tool(
            "test_input_required_result_elicitation", {}, capabilities={"sampling": {}}
        )
    assert (caught.value.code, caught.value.status) == (-32021, 400)
    assert caught.value.data == {"requiredCapabilities": {"elicitation": {}}}


async def test_sampling_with_tools_needs_sampling_tools() -> None:
    server = Server("s")

    @server.tool()
    async def ask_model(ctx: Context) -> str:
        """Samples with tools."""
        await ctx.input(
            {"q": sample("hi", 10, tools=[{"name": "t", "inputSchema": {"type": "object"}}])}
        )
        return "done"

    async with open_client(server) as client:
        with pytest.raises(RpcError) as caught:
            await client.call_tool("ask_model", {}, capabilities={"sampling": {}})
        assert caught.value.data == {"requiredCapabilities": {"sampling": {"tools": {}}}}


async def test_prompts_get_can_ask_too(client: Client) -> None:
    first = await client.get_prompt("test_input_required_result_prompt")
    assert first["resultType"] == "input_required"
    done = await client.get_prompt("test_input_required_result_prompt", answer=answer)
    assert done["messages"][0]["content"]["text"] == "Prompt with context: ctx"


async def test_list_methods_never_ask(client: Client) -> None:
    for method in ("tools/list", "prompts/list", "resources/list"):
        assert (await client.request(method))["resultType"] == "complete"


async def test_input_required_outside_the_allow_list_is_an_internal_error() -> None:
    from presa_trio._protocol.input_requests import InputRequired
    from presa_trio.extensions import Route

    server = Server("x")

    async def handler(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        raise InputRequired({"q": elicit("?", {})})

    server.dispatcher.add(Route("x/ask", handler))
    async with open_client(server) as client:
        with pytest.raises(RpcError) as caught:
            await client.request("x/ask")
        assert caught.value.code == -32603


async def test_state_is_bound_to_the_principal() -> None:
    server = build_server(principal=lambda ctx: str((ctx.meta.client_info or {}).get("name", "")))
    async with open_client(server) as client:
        state = await first_state(client, TAMPERED)
        client.client_info = {"name": "mallory", "version": "1"}
        with pytest.raises(RpcError) as caught:
            await retry(client, TAMPERED, state)
        assert caught.value.code == -32602
        client.client_info = {"name": "presa-trio-testing", "version": "1"}
        assert (await retry(client, TAMPERED, state))["resultType"] == "complete"
