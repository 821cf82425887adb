"""A server that cannot be reached, dies, hangs or talks nonsense gives a clear error from
``presa_trio.testing``'s client of any server, never a hang: the waits the client owns (the
handshake, the discover probe, the exit of a spawned server) are bounded, under trio's mock
clock where a server never answers."""

from __future__ import annotations

import sys
from functools import partial

import pytest
import trio
import trio.testing
from support.servers import SUPPORT, free_port

from presa_trio.testing import ProtocolError, TransportError, open_http, open_stdio

SCRIPT = str(SUPPORT / "broken_server.py")
SILENT = "import sys, time\nsys.stdin.readline()\ntime.sleep(600)"


async def test_a_command_that_cannot_start() -> None:
    with pytest.raises(TransportError) as raised:
        async with open_stdio(["/nonexistent/mcp-server"]):
            raise AssertionError("no server")  # pragma: no cover
    assert str(raised.value) == (
        "cannot start '/nonexistent/mcp-server': No such file or directory"
    )


async def test_an_empty_command() -> None:
    with pytest.raises(TransportError, match=r"^no command to start$"):
        async with open_stdio([]):
            raise AssertionError("no server")  # pragma: no cover


async def test_a_server_that_exits_at_once_names_its_exit_status() -> None:
    exits = "import sys\nsys.stdin.readline()\nsys.exit(3)"
    with trio.fail_after(30), pytest.raises(TransportError) as raised:
        async with open_stdio([sys.executable, "-c", exits]):
            raise AssertionError("no server")  # pragma: no cover
    assert str(raised.value) == "the server process closed its output (exit status 3)"


async def test_a_server_that_dies_during_a_call() -> None:
    with trio.fail_after(30):
        async with open_stdio([sys.executable, SCRIPT, "exit-on-call"]) as client:
            assert [t["name"] for t in await client.list_tools()] == ["echo"]
            with pytest.raises(TransportError) as raised:
                await client.call_tool("echo", {})
    assert str(raised.value) == "the server process closed its output (exit status 4)"


async def test_a_server_that_writes_what_is_not_json() -> None:
    talks = "import sys\nsys.stdin.readline()\nprint('hello', flush=True)\nsys.stdin.readline()"
    with trio.fail_after(30), pytest.raises(ProtocolError) as raised:
        async with open_stdio([sys.executable, "-c", talks]):
            raise AssertionError("no server")  # pragma: no cover
    assert str(raised.value) == "the server sent something that is not JSON"


async def test_a_stdio_server_that_never_answers_fails_the_handshake(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(TransportError) as raised:
        async with open_stdio([sys.executable, "-c", SILENT], handshake_timeout=30):
            raise AssertionError("no server")  # pragma: no cover
    assert str(raised.value) == "the server did not finish the handshake in 30 s"


async def test_nothing_listening_at_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with trio.fail_after(30), pytest.raises(TransportError) as raised:
        async with open_http(url):
            raise AssertionError("no server")  # pragma: no cover
    assert str(raised.value) == f"cannot connect to {url}: Connection refused"


async def test_an_http_server_that_never_answers_fails_the_handshake(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def accept_and_stay_silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(
            partial(trio.serve_tcp, accept_and_stay_silent, 0, host="127.0.0.1")
        )
        port = listener.socket.getsockname()[1]
        with pytest.raises(TransportError) as raised:
            async with open_http(f"http://127.0.0.1:{port}/mcp", handshake_timeout=30):
                raise AssertionError("no server")  # pragma: no cover
        nursery.cancel_scope.cancel()
    assert str(raised.value) == "the server did not finish the handshake in 30 s"


async def test_a_forced_version_the_server_does_not_agree_to() -> None:
    with trio.fail_after(30), pytest.raises(ProtocolError) as raised:
        async with open_stdio([sys.executable, SCRIPT, "old-none"], version="2025-06-18"):
            raise AssertionError("the server answered another version")  # pragma: no cover
    assert str(raised.value) == (
        "asked for protocol version 2025-06-18, the server answered '2025-11-25'"
        " (this client checks 2026-07-28, 2025-11-25, 2025-06-18)"
    )


async def test_a_version_with_no_schema_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError) as raised:
        async with open_http("http://127.0.0.1:9/mcp", version="2024-11-05"):
            raise AssertionError("refused")  # pragma: no cover
    assert str(raised.value) == (
        "version must be one of 2026-07-28, 2025-11-25, 2025-06-18, not '2024-11-05'"
    )


async def test_an_url_that_is_not_http() -> None:
    with pytest.raises(TransportError) as raised:
        async with open_http("ftp://127.0.0.1/mcp"):
            raise AssertionError("refused")  # pragma: no cover
    assert str(raised.value) == "not an http(s) URL: 'ftp://127.0.0.1/mcp'"


async def test_a_command_given_as_one_string_is_refused() -> None:
    with pytest.raises(TypeError) as raised:
        async with open_stdio("python server.py"):  # type: ignore[arg-type]
            raise AssertionError("refused")  # pragma: no cover
    assert str(raised.value) == (
        "command must be a list of words, like ['python', 'server.py']: 'python server.py'"
    )
