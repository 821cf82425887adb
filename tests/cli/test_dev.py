"""``presa-trio dev`` as a developer runs it: a server module in a folder of its own, served
on 127.0.0.1, restarted when its source is saved (the next call sees the change), waiting
out a save that does not import, and gone with its server at Ctrl-C or SIGTERM.

The issue asks for a reload within 2 s; the bound asserted is ``RELOAD_BOUND`` (ten times
that, for a loaded machine), and each test prints what it measured (``-s`` shows it).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
from support.live_http import mcp_request, request
from support.servers import ROOT, free_port

pytestmark = pytest.mark.e2e

RELOAD_BOUND = 20.0
# The tutorial's dev-loop server, its answer made a placeholder for each edit.
TUTORIAL = (ROOT / "docs" / "tutorial.md").read_text()
BLOCK = re.search(r"<!-- dev-loop -->\n```python\n(.*?)```", TUTORIAL, re.S)
assert BLOCK is not None, "the tutorial lost its dev-loop block"
SOURCE = BLOCK[1].replace('return "one"', 'return "{version}"')


@contextmanager
def dev(folder: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``presa-trio dev app:server`` in ``folder``; its output in ``folder/dev.log``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(folder / "dev.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "presa_trio", "dev", "app:server", "--http",
             f"127.0.0.1:{port}"],
            cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def version(port: int) -> str | None:
    """The served ``version``, or None while no server answers."""
    body, headers = mcp_request("tools/call", {"name": "version", "arguments": {}})
    try:
        with trio.fail_after(5):
            response = await request(port, body, headers)
    except (OSError, trio.TooSlowError):
        return None
    if response.status != 200 or not response.messages:
        return None
    text: str = response.messages[-1]["result"]["content"][0]["text"]
    return text


async def until_served(port: int, wanted: str, within: float) -> float:
    """Poll until the server answers ``wanted``; how long it took."""
    started = time.monotonic()
    with trio.fail_after(within):
        while await version(port) != wanted:  # noqa: ASYNC110 (another process serves)
            await trio.sleep(0.02)
    return time.monotonic() - started


def save(folder: Path, text: str) -> None:
    (folder / "app.py").write_text(text)


def servers_in(log: str) -> list[int]:
    """The pids of the servers hypercorn started, from its "Running on" lines."""
    return [int(pid) for pid in re.findall(r"\[(\d+)\] \[INFO\] Running on", log)]


async def test_a_save_reloads_the_server_and_the_next_call_sees_it(tmp_path: Path) -> None:
    save(tmp_path, SOURCE.format(version="one"))
    port = free_port()
    with dev(tmp_path, port) as process:
        await until_served(port, "one", 30)
        log = (tmp_path / "dev.log").read_text()
        assert f"presa-trio dev: serving app:server at http://127.0.0.1:{port}/mcp\n" in log
        assert (
            "presa-trio dev: inspect it with npx @modelcontextprotocol/inspector@2.12.0 --cli "
            f"http://127.0.0.1:{port}/mcp --transport http --method tools/list\n"
        ) in log
        # The line is written once the answer is sent: the client may read it first.
        line = r"INFO presa_trio\.requests .*tools/call version -> ok \(200\) in "
        with trio.move_on_after(30):
            while not re.search(line, (tmp_path / "dev.log").read_text()):  # noqa: ASYNC110
                await trio.sleep(0.02)
        assert re.search(line, (tmp_path / "dev.log").read_text())

        for edit in ("two", "three"):
            save(tmp_path, SOURCE.format(version=edit))
            took = await until_served(port, edit, RELOAD_BOUND)
            print(f"presa-trio dev: reloaded and served the edit in {took:.2f} s")

        # a save that does not import: the error is shown, the next save serves again
        save(tmp_path, SOURCE.format(version="four").replace("def version()", "def version("))
        with trio.fail_after(RELOAD_BOUND):
            while "waiting for a save" not in (tmp_path / "dev.log").read_text():  # noqa: ASYNC110
                await trio.sleep(0.05)
        log = (tmp_path / "dev.log").read_text()
        assert "SyntaxError" in log
        assert "presa-trio dev: the server exited with status 1; waiting for a save" in log
        assert await version(port) is None  # refused, not left waiting
        save(tmp_path, SOURCE.format(version="five"))
        took = await until_served(port, "five", RELOAD_BOUND)
        print(f"presa-trio dev: served again after the fix in {took:.2f} s")

        os.kill(process.pid, signal.SIGINT)  # Ctrl-C: the parent alone, as a terminal does
        assert process.wait(timeout=20) == 0
    log = (tmp_path / "dev.log").read_text()
    assert log.endswith("presa-trio dev: stopped\n")
    servers = servers_in(log)
    assert len(servers) == 4  # one, two, three, five
    for pid in servers:
        assert not os.path.exists(f"/proc/{pid}"), f"server {pid} outlived presa-trio dev"  # noqa: ASYNC240


async def test_sigterm_stops_it_and_its_server(tmp_path: Path) -> None:
    save(tmp_path, SOURCE.format(version="one"))
    port = free_port()
    with dev(tmp_path, port) as process:
        await until_served(port, "one", 30)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    (server,) = servers_in((tmp_path / "dev.log").read_text())
    assert not os.path.exists(f"/proc/{server}")  # noqa: ASYNC240


def test_a_module_that_is_not_there_is_one_line_and_status_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "presa_trio", "dev", "nowhere:server"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"presa-trio dev: cannot find the module 'nowhere' from {tmp_path}\n"
