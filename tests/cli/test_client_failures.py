"""What ``presa-trio list/call/read`` does when it cannot do its job: exit status 2 for a
command line it cannot use, 3 for a server it cannot reach or that breaks off, each with one
``presa-trio:`` line on stderr and no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.cli_runner import presa
from support.servers import free_port


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("presa-trio: ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["list"], "name a TARGET"),
        (["call", "cli_client_app:server"], "call needs a TOOL after the TARGET"),
        (["read", "cli_client_app:server"], "read takes a TARGET and one URI"),
        (["list", "cli_client_app:server", "extra"], "list takes only a TARGET, not 'extra'"),
        (["list", "--stdio"], "--stdio needs the server's command after --"),
        (["list", "nothing-here"], "'nothing-here' is neither an http(s):// URL nor MODULE:SERVER"),
        (["list", "no_such_module:server"], "cannot import 'no_such_module'"),
        (["list", "auth_app:server"], "importing 'auth_app' failed: KeyError: 'PRESA_AUTH_PORT'"),
        (["list", "cli_client_app:ASK_NAME"], "cli_client_app:ASK_NAME is a dict, not a"),
        (["call", "cli_client_app:server", "add", "--bogus"], "unrecognized arguments: --bogus"),
        (["call", "cli_client_app:server", "ask", "--answer", "name"], "--answer expects KEY=JSON"),
        (["call", "cli_client_app:server", "ask", "--answer", "name={"], "--answer name: not JSON"),
    ],
)
def test_a_command_line_it_cannot_use_exits_2(argv: list[str], reason: str) -> None:
    done = presa(*argv)
    assert done.returncode == 2
    assert one_error_line(done).startswith(f"presa-trio: {reason}")


def test_a_server_that_wants_authorization_exits_3() -> None:
    env = {"PRESA_AUTH_PORT": str(free_port()), "PRESA_AUTH_JWKS": '{"keys": []}'}
    done = presa("list", "auth_app:server", env=env)
    assert done.returncode == 3
    assert one_error_line(done) == (
        "presa-trio: the server wants authorization (HTTP 401), which this client does not send"
    )


def test_an_unreachable_url_exits_3() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    done = presa("list", url)
    assert done.returncode == 3
    assert one_error_line(done).startswith(f"presa-trio: cannot connect to {url}")


def test_a_command_that_cannot_start_exits_3() -> None:
    done = presa("list", "--stdio", "--", "/nonexistent/server")
    assert done.returncode == 3
    assert one_error_line(done) == (
        "presa-trio: cannot start '/nonexistent/server': No such file or directory"
    )


def test_a_spawned_server_that_exits_at_once_exits_3() -> None:
    done = presa("list", "--stdio", "--", sys.executable, "-c", "pass")
    assert done.returncode == 3
    assert one_error_line(done).startswith("presa-trio: the server process closed its output")


def test_a_spawned_server_that_writes_no_json_exits_3() -> None:
    noise = "import sys; sys.stdin.readline(); print('hello'); sys.stdin.read()"
    done = presa("list", "--stdio", "--", sys.executable, "-c", noise)
    assert done.returncode == 3
    assert one_error_line(done) == "presa-trio: the server sent something that is not JSON"


def test_a_spawned_server_that_never_answers_is_given_up_within_the_timeout() -> None:
    """It answers neither the probe nor ``initialize``; the command ends at ``--timeout``
    and the silent server is stopped (killed after its grace: it ignores end of input)."""
    silent = "import time; time.sleep(3600)"
    done = presa("list", "--timeout", "3", "--stdio", "--", sys.executable, "-c", silent)
    assert done.returncode == 3
    assert one_error_line(done) == "presa-trio: no answer within --timeout 3 seconds"
