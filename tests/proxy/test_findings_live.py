"""``presa-trio proxy`` in front of a server that breaks the schema (tests/support/
proxy_upstream_app.py under hypercorn on 127.0.0.1): each break reaches the client untouched
and is printed on the proxy's stderr while the proxy runs (for a stream, while the client is
still reading it); ``--check`` then exits 1."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from support.live_http import mcp_request, open_exchange, request
from support.proxy_process import Proxy, running_proxy
from support.servers import SUPPORT, running

pytestmark = pytest.mark.e2e
PREFIX = "presa-trio proxy: "


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with running("proxy_upstream_app:app", SUPPORT) as served:
        yield f"http://127.0.0.1:{served.port}/mcp"


@pytest.fixture
def proxy(upstream: str, tmp_path: Path) -> Iterator[Proxy]:
    with running_proxy(upstream, tmp_path) as running_one:
        yield running_one


def call(name: str, request_id: int = 1) -> tuple[bytes, list[tuple[str, str]]]:
    params = {"name": name, "arguments": {}}
    return mcp_request("tools/call", params, request_id=request_id, meta={"progressToken": "t1"})


def findings(proxy: Proxy) -> list[str]:
    return [
        line.removeprefix(PREFIX)
        for line in proxy.stderr().splitlines()
        if re.match(r"\d+: ", line.removeprefix(PREFIX))
    ]


def where(found: list[str]) -> list[str]:
    """Each finding without its reason (the wording is the checker's): line, $def, pointer."""
    shown = []
    for finding in found:  # LINE: $def at POINTER: reason
        line, _, rest = finding.partition(": ")
        definition, _, rest = rest.partition(" at ")
        shown.append(f"{line}: {definition} at {rest.partition(': ')[0]}")
    return shown


async def test_a_result_whose_content_is_a_string_is_reported_and_passed_on(
    proxy: Proxy,
) -> None:
    answer = await request(proxy.port, *call("bad_content"))
    assert answer.status == 200
    assert answer.messages == [
        {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": "not a list"}}
    ]
    proxy.wait_for("2: CallToolResult at /result/content: ")  # the proxy still runs
    assert where(findings(proxy)) == ["2: CallToolResult at /result/content"]
    assert proxy.stop() == 1  # --check


async def test_a_bad_notification_on_a_stream_is_reported_while_the_client_reads_it(
    proxy: Proxy,
) -> None:
    body, headers = call("bad_progress", request_id=7)
    async with open_exchange(proxy.port, body, headers) as stream:
        first = await stream.next_message()
        assert first["params"]["progress"] == "half"
        with trio.fail_after(60):  # the stream is still open: the finding came live
            while not findings(proxy):  # noqa: ASYNC110 (another process's output)
                await trio.sleep(0.02)
        assert where(findings(proxy)) == ["2: ProgressNotification at /params/progress"]
    assert proxy.lines()[1]["sse"] == {"event": "message"}
    assert proxy.stop() == 1


async def test_a_request_from_a_2026_server_is_reported(proxy: Proxy) -> None:
    answer = await request(proxy.port, *call("server_request", request_id=3))
    assert [m.get("method") for m in answer.messages] == ["roots/list", None]
    proxy.wait_for(f"{PREFIX}2: ")
    (found,) = where(findings(proxy))  # which $def names it is the checker's own choice
    assert found.startswith("2: ") and found.endswith(" at /id")
    assert proxy.stop() == 1


async def test_a_json_body_that_is_not_json_is_reported_with_its_start(proxy: Proxy) -> None:
    async with open_exchange(proxy.port, *call("not_json")) as answer:
        assert answer.status == 200
        assert await answer.chunk() == b"oops, not JSON"
    proxy.wait_for(f"{PREFIX}2: JSON")
    assert "2: JSON at /: the body is not JSON" in findings(proxy)
    line = proxy.lines()[1]
    assert line["body"] == "oops, not JSON" and "message" not in line
    assert proxy.stop() == 1


async def test_a_clean_exchange_finds_nothing_and_check_exits_0(proxy: Proxy) -> None:
    answer = await request(proxy.port, *call("fine"))
    assert answer.messages[0]["result"]["content"] == [{"type": "text", "text": "ok"}]
    assert proxy.stop() == 0
    assert findings(proxy) == []
    assert proxy.stderr().splitlines()[-1] == f"{PREFIX}2 line(s) recorded, 0 finding(s)"


async def test_a_result_to_an_id_nobody_sent_is_reported(proxy: Proxy) -> None:
    answer = await request(proxy.port, *call("stray"))
    assert answer.messages[0]["id"] == 999
    proxy.wait_for(f"{PREFIX}2: ", seconds=5)
    assert [f.split(": ")[0] for f in findings(proxy)] == ["2"]
    assert " at /id: " in findings(proxy)[0]


async def test_a_result_with_status_500_is_reported(proxy: Proxy) -> None:
    answer = await request(proxy.port, *call("bad_status"))
    assert answer.status == 500 and json.loads(answer.body)["result"]["content"]
    proxy.wait_for(f"{PREFIX}2: ", seconds=5)
    assert [f.split(": ")[0] for f in findings(proxy)] == ["2"]
