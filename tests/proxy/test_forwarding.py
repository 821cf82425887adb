"""What ``presa-trio proxy`` forwards, and how: a client that leaves cancels the upstream
exchange, an upstream that ends its stream ends the client's, a GET stream with its event
ids and ``Last-Event-ID``, a 401 challenge untouched, hop-by-hop headers dropped and ``Host``
rewritten, credentials redacted in the capture, and 502 with a JSON-RPC error when the
upstream cannot be reached. Real servers on 127.0.0.1 (tests/support/proxy_upstream_app.py
under hypercorn)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import h11
import pytest
import trio
from support.live_http import mcp_request, open_exchange, request
from support.proxy_process import running_proxy
from support.servers import SUPPORT, Served, free_port, running

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def upstream() -> Iterator[Served]:
    with running("proxy_upstream_app:app", SUPPORT) as served:
        yield served


def url(served: Served) -> str:
    return f"http://127.0.0.1:{served.port}/mcp"


def call(name: str, request_id: int = 1) -> tuple[bytes, list[tuple[str, str]]]:
    params = {"name": name, "arguments": {}}
    return mcp_request("tools/call", params, request_id=request_id, meta={"progressToken": "t1"})


async def test_a_client_that_leaves_mid_stream_cancels_the_upstream_exchange(
    upstream: Served, tmp_path: Path
) -> None:
    with running_proxy(url(upstream), tmp_path) as proxy:
        async with open_exchange(proxy.port, *call("wait", request_id=41)) as stream:
            assert (await stream.next_message())["params"]["progress"] == 1
        # The client's socket is closed: the proxy closes its own to the upstream.
        with trio.fail_after(60):
            while "upstream saw the client leave: 41" not in upstream.log():  # noqa: ASYNC110
                await trio.sleep(0.02)
        assert proxy.stop() == 0


async def test_an_upstream_that_breaks_its_stream_breaks_the_client_s(
    upstream: Served, tmp_path: Path
) -> None:
    with running_proxy(url(upstream), tmp_path) as proxy:
        async with open_exchange(proxy.port, *call("break", request_id=42)) as stream:
            assert (await stream.next_message())["params"]["progress"] == 1
            with pytest.raises(h11.RemoteProtocolError), trio.fail_after(60):
                await stream.next_message()  # no end of the body: the client sees a break
        assert proxy.stop() == 0
    assert "presa-trio proxy: the upstream broke the response: " in proxy.stderr()
    assert "Traceback" not in proxy.stderr()


async def test_a_get_stream_passes_event_by_event_until_the_upstream_ends_it(
    upstream: Served, tmp_path: Path
) -> None:
    headers = [("accept", "text/event-stream"), ("last-event-id", "e-0")]
    with running_proxy(url(upstream), tmp_path) as proxy:
        async with open_exchange(proxy.port, b"", headers, method="GET") as stream:
            assert stream.headers["x-last-event-id"] == "e-0"  # Last-Event-ID went through
            message = await stream.next_message()
            assert (message["method"], stream.last_event_id) == ("notifications/message", "e-1")
            with pytest.raises(EOFError), trio.fail_after(60):
                await stream.next_message()  # the upstream ended it: so does the proxy
        proxy.stop()
    opened, priming, logged = proxy.lines()
    assert opened["direction"] == "client" and "message" not in opened
    assert opened["http"]["method"] == "GET"
    assert opened["http"]["headers"]["last-event-id"] == "e-0"
    assert "message" not in priming and priming["sse"] == {"id": "e-0"}
    assert priming["http"]["status"] == 200 and priming["exchange"] == opened["exchange"]
    assert logged["sse"] == {"id": "e-1", "event": "message"}
    assert logged["message"]["params"] == {"level": "info", "data": "hello"}


async def test_a_401_challenge_passes_untouched_and_credentials_are_redacted(
    upstream: Served, tmp_path: Path
) -> None:
    body, headers = call("secret")
    with running_proxy(url(upstream), tmp_path) as proxy:
        refused = await request(proxy.port, body, headers)
        assert (refused.status, refused.body) == (401, b"")
        assert refused.headers["www-authenticate"] == (
            'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"'
        )
        secret = [("authorization", "Bearer s3cr3t"), ("cookie", "id=s3cr3t")]
        answered = await request(proxy.port, body, headers + secret)
        assert answered.status == 200
        proxy.stop()
    assert "s3cr3t" not in proxy.capture.read_text()
    _, challenged, again, _ = proxy.lines()
    assert challenged["http"]["status"] == 401 and "message" not in challenged
    assert again["http"]["headers"]["authorization"] == "[redacted]"
    assert again["http"]["headers"]["cookie"] == "[redacted]"


async def test_hop_by_hop_headers_stay_and_host_names_the_upstream(
    upstream: Served, tmp_path: Path
) -> None:
    body, headers = call("headers")
    hop = [("connection", "keep-alive, x-hop"), ("x-hop", "1"), ("keep-alive", "timeout=5"),
           ("te", "trailers"), ("mcp-session-id", "s-0"), ("x-end-to-end", "kept"),
           ("accept-encoding", "gzip")]  # fmt: skip
    with running_proxy(url(upstream), tmp_path) as proxy:
        answer = await request(proxy.port, body, headers + hop)
        proxy.stop()
    seen = json.loads(answer.messages[0]["result"]["content"][0]["text"])
    assert seen["host"] == f"127.0.0.1:{upstream.port}"
    assert seen["connection"] == "close"  # the proxy's own, one exchange a connection
    assert not {"x-hop", "keep-alive", "te", "accept-encoding"} & set(seen)
    assert (seen["mcp-session-id"], seen["x-end-to-end"]) == ("s-0", "kept")
    assert seen["mcp-method"] == "tools/call"
    assert answer.headers["mcp-session-id"] == "s-1"  # and back


async def test_an_unreachable_upstream_is_answered_502_with_a_json_rpc_error(
    tmp_path: Path,
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    with running_proxy(nowhere, tmp_path) as proxy:
        answer = await request(proxy.port, *call("anything", request_id=12))
        assert answer.status == 502
        assert answer.headers["content-type"] == "application/json"
        (error,) = answer.messages
        assert error["id"] == 12 and error["error"]["code"] == -32603
        assert nowhere in error["error"]["message"]
        opened = await request(proxy.port, b"", [("accept", "text/event-stream")], method="GET")
        assert opened.status == 502 and opened.headers["content-type"] == "text/plain"
        assert nowhere in opened.body.decode()
        proxy.stop()
    assert f"presa-trio proxy: cannot connect to {nowhere}" in proxy.stderr()
    # What the proxy answered itself is not traffic of the server's: only the requests.
    assert [line["direction"] for line in proxy.lines()] == ["client", "client"]


async def test_ctrl_c_ends_open_streams_and_the_proxy_in_time(
    upstream: Served, tmp_path: Path
) -> None:
    with running_proxy(url(upstream), tmp_path) as proxy:
        async with open_exchange(proxy.port, *call("wait", request_id=43)) as stream:
            assert (await stream.next_message())["params"]["progress"] == 1
            proxy.served.process.send_signal(signal.SIGINT)
            # After its grace the proxy cuts the stream: no end of the chunked body.
            with pytest.raises(h11.RemoteProtocolError), trio.fail_after(60):
                await stream.next_message()
        assert proxy.served.process.wait(timeout=60) == 0
    with trio.fail_after(60):
        while "upstream saw the client leave: 43" not in upstream.log():  # noqa: ASYNC110
            await trio.sleep(0.02)


def test_client_connections_are_numbered_and_the_oldest_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One number per client address, stable while remembered; a long run keeps only the
    newest ``REMEMBERED_CONNECTIONS`` addresses, and one seen again later is a new number."""
    from presa_trio._proxy import http as proxy_http

    monkeypatch.setattr(proxy_http, "REMEMBERED_CONNECTIONS", 3)
    app = proxy_http.ProxyApp(cast(Any, None), cast(Any, None))

    def number(port: int) -> int:
        return app._connection({"client": ("127.0.0.1", port)})

    assert [number(p) for p in (1, 2, 1, 3)] == [1, 2, 1, 3]
    assert number(4) == 4  # the fourth address forgets the least recently seen (port 2)
    assert len(app._connections) == 3
    assert [number(1), number(2)] == [1, 5]
