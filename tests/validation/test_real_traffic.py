"""Real traffic yields no finding: captures of servers presa_trio did not write (the ``mcp``
2.x ``MCPServer`` and FastMCP of the test venv, the ``mcp`` 1.30 FastMCP of the cached
virtualenv) and of presa_trio's own, in both eras, driven by the official SDK's client; and
presa_trio's own HTTP traffic, statuses and headers included, with its Tasks extension.

Stdio conversations are recorded by tests/support/capture_tee.py (the client spawns it in
place of the server); the SDK client's HTTP exchanges by its own transport
(tests/support/capture_driver.py), statuses and headers included; presa_trio's in-process
exchanges by tests/support/recording_app.py around the app.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from support import client_installs
from support.published_clients import PRESA_TRIO, run_script
from support.recording_app import RecordingApp
from support.servers import ROOT, SUPPORT, Served, free_port, wait_listening

from fixtures.conformance import build_server
from presa_trio.testing import Client, RpcError
from presa_trio.validation import check_capture

pytestmark = pytest.mark.e2e

TEE = str(SUPPORT / "capture_tee.py")
CALLS = json.dumps([["add", {"a": 1, "b": 2}], ["fail", {}]])


def tee(capture: Path, *command: str, env: dict[str, str] | None = None) -> str:
    """A stdio target (JSON, as the client scripts take it) spawning ``command`` through the
    capture tee."""
    target: dict[str, Any] = {
        "command": sys.executable,
        "args": [TEE, str(capture), "--", *command],
        "cwd": str(ROOT),
    }
    if env is not None:
        target["env"] = env
    return json.dumps(target)


def checked(capture: Path, messages_at_least: int) -> list[str]:
    lines = capture.read_text().splitlines()
    assert len(lines) >= messages_at_least, lines
    assert [str(f) for f in check_capture(lines)] == []
    return lines


def directions(lines: list[str]) -> set[str]:
    return {json.loads(line)["direction"] for line in lines}


@pytest.mark.parametrize("kind", ["mcp2", "fastmcp"])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sdk_and_fastmcp_servers_over_stdio(tmp_path: Path, kind: str, mode: str) -> None:
    capture = tmp_path / "capture.jsonl"
    server = tee(capture, sys.executable, str(SUPPORT / "traffic_servers.py"), kind)
    seen = run_script(sys.executable, "capture_driver.py", mode, server, CALLS)
    assert seen["protocol_version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert seen["calls"] == {"add": {"is_error": False}, "fail": {"is_error": True}}
    lines = checked(capture, 12)
    assert directions(lines) == {"client", "server"}


def serving(command: list[str], log_path: Path, what: str) -> Iterator[str]:
    """Run a server that listens on the port ending ``command`` until the block ends; its
    URL."""
    port = free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen([*command, str(port)], stdout=log, stderr=subprocess.STDOUT)
    served = Served(port, process, log_path)
    try:
        wait_listening(served, what, seconds=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        try:
            served.stop()
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def http_records(capture: Path, at_least: int) -> list[dict[str, Any]]:
    lines = checked(capture, at_least)
    records = [json.loads(line) for line in lines]
    assert all("http" in record for record in records)
    return records


@pytest.fixture(params=["mcp2", "fastmcp"])
def sdk_http(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    command = [sys.executable, str(SUPPORT / "traffic_servers.py"), request.param]
    yield from serving(command, tmp_path / "server.log", request.param)


def test_sdk_and_fastmcp_servers_refuse_with_the_statuses_2026_requires(
    tmp_path: Path, sdk_http: str
) -> None:
    """An unknown method (404, -32601) and an unknown resource (400, -32602) from the
    servers themselves: no finding but the probe's own misspelt method."""
    capture = tmp_path / "capture.jsonl"
    target = json.dumps({"url": sdk_http, "capture": str(capture), "probe": True})
    seen = run_script(sys.executable, "capture_driver.py", "auto", target, CALLS)
    assert seen["probes"] == [404, 400]
    lines = capture.read_text().splitlines()
    [finding] = check_capture(lines)
    assert (finding.rule, finding.direction) == ("unknown-method", "client")
    assert json.loads(lines[finding.line - 1])["message"]["method"] == "tools/cal"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sdk_and_fastmcp_servers_over_http(tmp_path: Path, sdk_http: str, mode: str) -> None:
    capture = tmp_path / "capture.jsonl"
    target = json.dumps({"url": sdk_http, "capture": str(capture)})
    seen = run_script(sys.executable, "capture_driver.py", mode, target, CALLS)
    assert seen["calls"] == {"add": {"is_error": False}, "fail": {"is_error": True}}
    records = http_records(capture, 12)
    if mode == "legacy":  # a session: 202 for the initialized notification, ended by DELETE
        statuses = [r["http"].get("status") for r in records if r["direction"] == "server"]
        assert 202 in statuses
        assert any(r["http"].get("method") == "DELETE" for r in records)


@pytest.fixture(scope="module")
def mcp1_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    python = client_installs.mcp1_python()
    command = [str(python), str(SUPPORT / "mcp1_server.py"), "http"]
    log = tmp_path_factory.mktemp("mcp1") / "server.log"
    yield from serving(command, log, "the mcp 1.x server")


@pytest.mark.parametrize("mode", ["legacy", "2025-06-18"])
def test_the_mcp_1_30_server_over_http(tmp_path: Path, mcp1_http: str, mode: str) -> None:
    capture = tmp_path / "capture.jsonl"
    target = json.dumps({"url": mcp1_http, "capture": str(capture)})
    calls = json.dumps([["add", {"a": 1, "b": 2}], ["fail", {}], ["ask", {}]])
    seen = run_script(sys.executable, "capture_driver.py", mode, target, calls)
    assert seen["protocol_version"] == ("2025-11-25" if mode == "legacy" else "2025-06-18")
    http_records(capture, 14)


def test_the_mcp_1_30_server_refuses_a_2026_probe_under_another_id(
    tmp_path: Path, mcp1_http: str
) -> None:
    """The SDK client's default mode probes with server/discover first: mcp 1.30 refuses it
    with 400 and a JSON-RPC error whose id is "server-error", not the request's (a real
    fault, the only finding); the client then falls back to initialize, all clean."""
    capture = tmp_path / "capture.jsonl"
    target = json.dumps({"url": mcp1_http, "capture": str(capture)})
    seen = run_script(sys.executable, "capture_driver.py", "auto", target, CALLS)
    assert seen["protocol_version"] == "2025-11-25"
    lines = capture.read_text().splitlines()
    [finding] = check_capture(lines)
    assert (finding.line, finding.rule, finding.pointer) == (2, "orphan-response", "/id")
    assert finding.message == (
        "id 'server-error' answers the server/discover request of its HTTP exchange, whose id is 1"
    )
    refusal = json.loads(lines[1])
    assert refusal["http"]["status"] == 400 and refusal["message"]["error"]["code"] == -32600


@pytest.mark.parametrize("mode", ["legacy", "2025-06-18"])
def test_the_mcp_1_30_server_in_both_older_revisions(tmp_path: Path, mode: str) -> None:
    python = client_installs.mcp1_python()
    capture = tmp_path / "capture.jsonl"
    server = tee(capture, str(python), str(SUPPORT / "mcp1_server.py"), "stdio")
    calls = json.dumps([["add", {"a": 1, "b": 2}], ["fail", {}], ["ask", {}]])
    seen = run_script(sys.executable, "capture_driver.py", mode, server, calls)
    assert seen["protocol_version"] == ("2025-11-25" if mode == "legacy" else "2025-06-18")
    lines = checked(capture, 14)
    # ``ask`` made the server send an elicitation request, legal in these revisions
    sent = [json.loads(line) for line in lines]
    assert any(
        r["direction"] == "server" and r["message"].get("method") == "elicitation/create"
        for r in sent
    )


def presa_stdio(capture: Path, app: str) -> str:
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(SUPPORT)])}
    return tee(capture, str(PRESA_TRIO), "serve", app, "--stdio", env=env)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_presa_servers_over_stdio_driven_by_the_sdk(tmp_path: Path, mode: str) -> None:
    """The conformance fixture, and the clients app through the SDK client's whole
    older-era exercise (sampling and elicitation from the server, progress, logging,
    subscriptions, ping)."""
    fixture = tmp_path / "fixture.jsonl"
    calls = json.dumps([["test_simple_text", {}], ["test_error_handling", {}],
                        ["greet", {"name": "SDK"}], ["test_image_content", {}]])  # fmt: skip
    target = presa_stdio(fixture, "fixtures.conformance:server")
    seen = run_script(sys.executable, "capture_driver.py", mode, target, calls)
    assert seen["calls"]["test_error_handling"] == {"is_error": True}
    checked(fixture, 14)
    exercise = tmp_path / "clients.jsonl"
    run_script(
        sys.executable, "mcp2_legacy_client.py", mode, presa_stdio(exercise, "clients_app:server")
    )
    lines = checked(exercise, 8 if mode == "auto" else 30)
    if mode == "legacy":
        methods = {json.loads(line)["message"].get("method") for line in lines}
        assert {"sampling/createMessage", "elicitation/create", "notifications/progress",
                "ping", "resources/subscribe"} <= methods  # fmt: skip


def elicited(key: str, request: dict[str, Any]) -> dict[str, Any]:
    if request["method"] == "elicitation/create":
        properties = request["params"]["requestedSchema"].get("properties", {})
        content = {"confirm": True} if "confirm" in properties else {"name": "Ada"}
        return {"action": "accept", "content": content}
    if request["method"] == "roots/list":
        return {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "hi"},
        "model": "test-model",
        "stopReason": "endTurn",
    }


async def exercise(client: Client) -> None:
    """Most of what the conformance fixture serves, each answer as it comes."""
    await client.discover()
    tools = await client.list_tools()
    await client.request("resources/list")
    await client.request("resources/templates/list")
    prompts = (await client.request("prompts/list"))["prompts"]
    await client.get_prompt(prompts[0]["name"], {
        a["name"]: "x" for a in prompts[0].get("arguments", [])})  # fmt: skip
    for name in ("test_simple_text", "test_image_content", "test_embedded_resource",
                 "test_multiple_content_types", "test_error_handling", "greet",
                 "test_input_required_result_elicitation", "test_input_required_result_sampling",
                 "test_input_required_result_multi_round"):  # fmt: skip
        assert any(tool["name"] == name for tool in tools)
        await client.call_tool(name, {}, answer=elicited)
    async with client.stream("tools/call", {"name": "test_tool_with_progress"},
                             meta={"progressToken": "p-1"}) as stream:  # fmt: skip
        async for _ in stream:
            pass
    with pytest.raises(RpcError):
        await client.call_tool("no_such_tool", {})
    with pytest.raises(RpcError):
        await client.request("tools/cal")
    # the Tasks extension: created, polled, answered, cancelled, failed
    done = await client.create_task("slow_compute", {"seconds": 0.01, "label": "a"})
    await client.wait_task(done)
    asking = await client.create_task("confirm_delete", {"filename": "f.txt"})
    await client.wait_task(asking, ("input_required",))
    task = await client.get_task(asking)
    await client.update_task(asking, {k: elicited(k, r) for k, r in task["inputRequests"].items()})
    await client.wait_task(asking)
    slow = await client.create_task("slow_compute", {"seconds": 60})
    await client.cancel_task(slow)
    await client.wait_task(slow)
    for name in ("failing_job", "protocol_error_job"):
        await client.wait_task(await client.create_task(name))


async def test_presa_http_traffic_with_tasks_is_clean() -> None:
    app = RecordingApp(build_server().asgi_app())
    async with app.app.lifespan():
        with trio.fail_after(30):
            await exercise(Client(app))  # type: ignore[arg-type]
    records = [json.loads(line) for line in app.lines]
    statuses = {r["http"]["status"] for r in records if r["direction"] == "server"}
    assert {200, 404} <= statuses  # the misspelt method got its 404
    results = [r["message"].get("result", {}) for r in records if "message" in r]
    assert any(r.get("resultType") == "task" for r in results)
    assert any(r.get("status") == "input_required" for r in results)
    # the only finding is the client's own misspelt method, which the server answered right
    [typo] = check_capture(app.lines)
    assert (typo.rule, typo.pointer, typo.direction) == ("unknown-method", "/method", "client")
    assert json.loads(app.lines[typo.line - 1])["message"]["method"] == "tools/cal"
