"""The presa-trio command as a user runs it: serve over stdio and HTTP, validate captures."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from support.live_http import call, mcp_request
from support.live_http import request as post
from support.servers import ROOT, free_port

from presa_trio._cli import _listening

pytestmark = pytest.mark.e2e

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def request(request_id: int, method: str, params: dict[str, Any] | None = None) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**(params or {}), "_meta": META},
        }
    )


def presa(
    *args: str, stdin: str | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "presa_trio", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_help_is_for_newcomers() -> None:
    result = presa("--help")
    assert result.returncode == 0
    for words in ("serve", "validate", "--http", "--stdio", "MODULE:SERVER"):
        assert words in result.stdout
    serve_help = presa("serve", "--help").stdout
    assert "stdin" in serve_help and "loopback" in serve_help


def test_serve_stdio_answers_and_exits_at_eof() -> None:
    lines = (
        "\n".join(
            [
                request(1, "server/discover"),
                request(
                    2, "tools/call", {"name": "forecast", "arguments": {"city": "Oslo", "days": 2}}
                ),
            ]
        )
        + "\n"
    )
    result = presa("serve", "examples.weather:server", "--stdio", stdin=lines)
    assert result.returncode == 0, result.stderr
    messages = [json.loads(line) for line in result.stdout.splitlines()]
    by_id = {m["id"]: m for m in messages if "id" in m}
    assert by_id[1]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "weather"
    assert by_id[2]["result"]["content"] == [{"type": "text", "text": "Oslo: sunny for 2 days"}]


def test_serve_rejects_a_bad_target() -> None:
    result = presa("serve", "examples.nowhere:server", "--stdio", stdin="")
    assert result.returncode != 0 and "cannot import" in result.stderr
    result = presa("serve", "examples.weather:nothing", "--stdio", stdin="")
    assert result.returncode != 0 and "has no" in result.stderr


@pytest.fixture
def cli_http_port() -> Iterator[int]:
    """`presa-trio serve examples.weather:server --http 127.0.0.1:PORT`, stopped by a signal."""
    yield from serving()


def serving(*flags: str) -> Iterator[int]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "presa_trio",
        "serve",
        "examples.weather:server",
        "--http",
        f"127.0.0.1:{port}",
        *flags,
    ]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            assert process.wait(timeout=10) == 0  # SIGTERM (or Ctrl-C) is a clean stop
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


async def test_serve_http_on_loopback(cli_http_port: int) -> None:
    with trio.fail_after(30):
        while True:
            try:
                result = await call(
                    cli_http_port, "tools/call", {"name": "forecast", "arguments": {"city": "Rome"}}
                )
                break
            except OSError:
                await trio.sleep(0.1)
    assert result["content"][0]["text"] == "Rome: sunny for 3 days"


GOOD = [
    # the request carries a progress token, so the progress on the next line is for it
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {"_meta": {**META, "progressToken": 1}},
        }
    ),
    json.dumps(
        {
            "direction": "server",
            "message": {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1},
            },
        }
    ),
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {},
                "ttlMs": 0,
                "cacheScope": "public",
            },
        }
    ),
    json.dumps(
        {
            "direction": "client",
            "message": {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 1},
            },
        }
    ),
    "",
]


def validate(tmp_path: Path, lines: list[str]) -> subprocess.CompletedProcess[str]:
    capture = tmp_path / "capture.jsonl"
    capture.write_text("\n".join(lines) + "\n")
    return presa("validate", str(capture))


def test_validate_a_good_capture(tmp_path: Path) -> None:
    result = validate(tmp_path, GOOD)
    assert result.returncode == 0, result.stdout
    assert result.stdout == ""
    assert "4 message(s), 0 bad" in result.stderr


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", ":3: JSON at /: not JSON"),
        ("[1, 2]", ":3: JSONRPCMessage at /: a message must be a JSON object"),
        (request(5, "tools/list").replace('"2.0"', '"1.0"'), ":3: ListToolsRequest at /jsonrpc:"),
        (
            json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}),
            ":3: ListToolsRequest at /params:",
        ),
        (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "result": {"resultType": "complete", "supportedVersions": ["x"]},
                }
            ),
            ":3: DiscoverResult at /result:",
        ),
        (
            json.dumps({"jsonrpc": "2.0", "id": 9, "result": {}}),
            ":3: JSONRPCResultResponse at /result:",
        ),
        (
            json.dumps({"jsonrpc": "2.0", "id": 2, "error": {"code": -32022, "message": "x"}}),
            ":3: UnsupportedProtocolVersionError at /error:",
        ),
        (
            json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "x"}}),
            ":3: JSONRPCErrorResponse at /id:",
        ),
        (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": 1},
                }
            ),
            ":3: ProgressNotification at /params:",
        ),
        (
            json.dumps(
                {
                    "direction": "server",
                    "message": {
                        "jsonrpc": "2.0",
                        "id": 3,
                        "method": "elicitation/create",
                        "params": {},
                    },
                }
            ),
            ":3: ServerNotification at /id: servers must not send requests",
        ),
    ],
)
def test_validate_reports_each_fault(tmp_path: Path, line: str, expected: str) -> None:
    result = validate(tmp_path, [GOOD[0], GOOD[1], line])
    assert result.returncode == 1, result.stdout
    assert expected in result.stdout, result.stdout
    assert "1 bad" in result.stderr


def test_validate_unreadable_file(tmp_path: Path) -> None:
    result = presa("validate", str(tmp_path / "missing.jsonl"))
    assert result.returncode == 2 and "cannot read" in result.stderr


def test_validate_from_stdin() -> None:
    result = presa("validate", "-", stdin="\n".join(GOOD))
    assert result.returncode == 0 and "4 message(s), 0 bad" in result.stderr


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="Linux socket option")
def test_the_listening_socket_carries_the_write_deadline() -> None:
    bind = _listening("127.0.0.1:0", 2.5)
    assert bind.startswith("fd://")
    with socket.socket(fileno=int(bind.removeprefix("fd://"))) as sock:
        assert sock.getsockname()[0] == "127.0.0.1"
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 2500
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_a_unix_or_fd_bind_is_passed_through_and_a_bad_one_refused() -> None:
    assert _listening("unix:/tmp/presa.sock", 2.0) == "unix:/tmp/presa.sock"
    assert _listening("fd://3", 2.0) == "fd://3"
    with pytest.raises(SystemExit, match=r"^presa-trio: --http expects HOST:PORT, got 'nope'$"):
        _listening("nope", 2.0)
    port = free_port()
    held = socket.create_server(("127.0.0.1", port))
    with held, pytest.raises(SystemExit, match=r"^presa-trio: cannot listen on 127\.0\.0\.1:"):
        _listening(f"127.0.0.1:{port}", 2.0)


@pytest.mark.parametrize(
    ("store", "line"),
    [
        (
            "bogus:",
            "presa-trio: unknown store 'bogus': use memory:, sqlite:///ABSOLUTE/PATH.db or "
            "postgresql://USER@HOST:PORT/DB",
        ),
        (
            "sqlite:///no/such/dir/x.db",
            "presa-trio: cannot use the sqlite store /no/such/dir/x.db: no directory /no/such/dir",
        ),
    ],
)
def test_serve_refuses_an_unusable_store_before_it_listens(store: str, line: str) -> None:
    port = free_port()
    flag = presa(
        "serve", "examples.weather:server", "--http", f"127.0.0.1:{port}", "--store", store
    )
    assert (flag.returncode, flag.stderr) == (2, line + "\n")
    with socket.socket() as probe:  # nothing was listening, and nothing is
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    env = {**os.environ, "PRESA_STORE": store}
    from_env = subprocess.run(
        [sys.executable, "-m", "presa_trio", "serve", "examples.weather:server", "--stdio"],
        cwd=ROOT,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (from_env.returncode, from_env.stderr) == (2, line + "\n")


def test_serve_with_a_sqlite_store_answers_and_keeps_its_file(tmp_path: Path) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    result = presa(
        "serve",
        "examples.weather:server",
        "--stdio",
        "--store",
        f"sqlite:///{tmp_path}/state.db",
        stdin=json.dumps(request) + "\n",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["result"]["tools"]
    assert (tmp_path / "state.db").is_file()


def test_serve_refuses_an_unreachable_postgresql_without_its_password(tmp_path: Path) -> None:
    url = f"postgresql://presa:s3cret@/presa?host={tmp_path}&port=5999&timeout=1"
    result = presa("serve", "examples.weather:server", "--stdio", "--store", url, stdin="")
    assert result.returncode == 2
    line = result.stderr
    assert line.count("\n") == 1, line
    assert line.startswith(
        f"presa-trio: cannot use the postgresql store postgresql://presa@{tmp_path}:5999/presa: "
    )
    assert "s3cret" not in line


def test_version() -> None:
    result = presa("--version")
    assert (result.returncode, result.stdout) == (0, "presa-trio 0.1.0\n")


async def test_serve_allows_the_hosts_and_the_body_size_it_is_told() -> None:
    port_of = serving("--allow-host", "MCP.example.com", "--max-body", "600")
    port = next(port_of)
    try:
        body, headers = mcp_request("tools/list")

        async def answer(host: str, payload: bytes = body) -> int:
            with trio.fail_after(30):
                while True:
                    try:
                        response = await post(port, payload, [*headers, ("host", host)])
                        return response.status
                    except OSError:
                        await trio.sleep(0.1)

        assert await answer("mcp.example.com") == 200
        assert await answer("mcp.example.com:443") == 200
        assert await answer("127.0.0.1") == 200  # loopback names stay allowed
        assert await answer("evil.example.com") == 403
        padded = body[:-1] + b', "pad": "' + b"x" * 700 + b'"}'
        assert await answer("mcp.example.com", padded) == 413
    finally:
        next(port_of, None)


def mrtr_round(*flags: str, responses: dict[str, Any] | None = None, state: str = "") -> Any:
    params: dict[str, Any] = {"name": "test_input_required_result_elicitation", "arguments": {}}
    if responses is not None:
        params.update(inputResponses=responses, requestState=state)
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    line = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**params, "_meta": meta}}
    )
    result = presa("serve", "fixtures.conformance:server", "--stdio", *flags, stdin=line + "\n")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_state_keys_from_the_command_line_verify_in_another_process() -> None:
    key = "k1:" + "ab" * 32
    asked = mrtr_round("--state-key", key)["result"]
    assert asked["resultType"] == "input_required"
    answer = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
    again = mrtr_round("--state-key", key, responses=answer, state=asked["requestState"])
    assert again["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    other = mrtr_round(
        "--state-key", "k1:" + "cd" * 32, responses=answer, state=asked["requestState"]
    )
    assert other["error"]["code"] == -32602
    refused = presa("serve", "examples.weather:server", "--stdio", "--state-key", "k1:zz")
    assert (refused.returncode, refused.stderr) == (
        2,
        "presa-trio: a state key is ID:HEX, the id without '.', the key at least 16 bytes of hex\n",
    )


STUCK_APP = '''
import os
from pathlib import Path

import trio

from presa_trio import Server

server = Server("stuck", loop_warning=None)


@server.tool()
async def hold() -> str:
    """Ignores its cancellation for a minute."""
    Path(os.environ["STUCK_FLAG"]).write_text("entered")
    with trio.CancelScope(shield=True):
        await trio.sleep(60)
    return "late"
'''


def stuck_command(tmp_path: Path, *mode: str) -> tuple[list[str], dict[str, str], Path]:
    """``presa-trio serve`` of a server whose one tool ignores its cancellation."""
    (tmp_path / "stuck_app.py").write_text(STUCK_APP)
    flag = tmp_path / "entered"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "STUCK_FLAG": str(flag)}
    command = [sys.executable, "-m", "presa_trio", "serve", "stuck_app:server", *mode]
    return [*command, "--shutdown-timeout", "1"], env, flag


def test_serve_stdio_ends_a_shutdown_that_outlasts_its_bound(tmp_path: Path) -> None:
    """The process is the command's: past ``--shutdown-timeout`` after the end of input, it
    exits with status 70 (EX_SOFTWARE), whatever still runs."""
    command, env, flag = stuck_command(tmp_path, "--stdio")
    line = request(1, "tools/call", {"name": "hold", "arguments": {}}) + "\n"
    result = subprocess.run(
        command, cwd=tmp_path, env=env, input=line, capture_output=True, text=True, timeout=60
    )
    assert flag.read_text() == "entered"
    assert result.returncode == 70, result.stderr
    assert "shutdown did not finish within 1 s" in result.stderr
    assert result.stdout == ""  # the held request never answered


def connected(port: int) -> socket.socket:
    """A connection to the server on ``port``, once it listens (30 s at most)."""
    for _ in range(300):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


def test_serve_http_ends_a_shutdown_that_outlasts_its_bound(tmp_path: Path) -> None:
    """The same over HTTP: past ``--shutdown-timeout`` after SIGTERM, status 70. The app
    itself arms no bound (it is the command's, not the library's)."""
    command, env, flag = stuck_command(tmp_path)
    port = free_port()
    process = subprocess.Popen(
        [*command, "--http", f"127.0.0.1:{port}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        body = request(1, "tools/call", {"name": "hold", "arguments": {}}).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            "accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n"
            f"mcp-method: tools/call\r\nmcp-name: hold\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        with connected(port) as held:
            held.sendall(head.encode() + body)
            for _ in range(300):
                if flag.exists():
                    break
                time.sleep(0.1)
            assert flag.read_text() == "entered"
            process.send_signal(signal.SIGTERM)
            status = process.wait(timeout=30)
        stderr = process.stderr.read() if process.stderr else ""
        assert status == 70, stderr
        assert "shutdown did not finish within 1 s" in stderr
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if process.stderr:
            process.stderr.close()
