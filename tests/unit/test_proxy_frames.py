"""The proxy's pure pieces: SSE events and stdio lines split however the bytes fall, headers
as a capture writes them, hop-by-hop headers dropped, upstream URLs parsed, bodies read."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from presa_trio._proxy.frames import LineSplitter, SseEvent, SseSplitter
from presa_trio._proxy.recorder import Passed, header_map, parse_body
from presa_trio._proxy.upstream import Upstream, forwarded

STREAM = (
    b": keep-alive\n\n"
    b"id: e-0\nretry: 1000\ndata: \n\n"
    b'id: e-1\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
    b'data: {"b": 2}\n\n'
    b'data: "caf\xc3\xa9"\r\r'  # bare CRs end lines too; a character split between chunks
)
EVENTS = [
    SseEvent("", "e-0", None, retry=True),
    SseEvent('{"a":\n1}', "e-1", "message"),
    SseEvent('{"b": 2}'),
    SseEvent('"caf\u00e9"'),
]


def test_sse_events_keep_their_id_name_and_data_and_comments_are_no_event() -> None:
    assert SseSplitter().feed(STREAM) == EVENTS


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=8))
def test_sse_events_are_the_same_however_the_chunks_fall(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    splitter = SseSplitter()
    events = []
    for start, end in pairwise(points):
        events += splitter.feed(STREAM[start:end])
    assert events == EVENTS


def test_stdio_lines_come_out_byte_for_byte_with_their_newline() -> None:
    lines = LineSplitter(100)
    assert lines.feed(b'{"a": 1}\r\n\n{"b"') == [(b'{"a": 1}\r\n', True), (b"\n", True)]
    assert lines.feed(b": 2}\n") == [(b'{"b": 2}\n', True)]
    assert lines.feed(b"rest") == []
    assert lines.close() == [(b"rest", True)]


def test_a_line_over_the_limit_comes_out_in_pieces_never_whole() -> None:
    lines = LineSplitter(4)
    assert lines.feed(b"abcdefg") == [(b"abcdefg", False)]
    assert lines.feed(b"hi\nok\n") == [(b"hi\n", False), (b"ok\n", True)]


def test_headers_are_lowercased_joined_and_credentials_redacted() -> None:
    raw = [(b"Authorization", b"Bearer x"), (b"Set-Cookie", b"a=1"), (b"X-Many", b"1"),
           (b"x-many", b"2"), ("Cookie", "b=2"), (b"Proxy-Authorization", b"Basic y")]  # fmt: skip
    assert header_map(raw) == {
        "authorization": "[redacted]",
        "set-cookie": "[redacted]",
        "x-many": "1, 2",
        "cookie": "[redacted]",
        "proxy-authorization": "[redacted]",
    }


def test_hop_by_hop_headers_and_those_connection_names_are_not_forwarded() -> None:
    raw = [(b"Connection", b"keep-alive, X-Hop"), (b"x-hop", b"1"), (b"TE", b"trailers"),
           (b"transfer-encoding", b"chunked"), (b"content-length", b"3"), (b"host", b"a"),
           (b"mcp-session-id", b"s"), (b"last-event-id", b"e-1")]  # fmt: skip
    assert forwarded(raw) == [(b"mcp-session-id", b"s"), (b"last-event-id", b"e-1")]


def test_an_upstream_url_gives_its_target_and_host() -> None:
    up = Upstream.parse("https://user@example.test:8443/base/mcp?tenant=a")
    assert (up.host, up.port, up.tls) == ("example.test", 8443, True)
    assert (up.target, up.authority) == ("/base/mcp?tenant=a", "example.test:8443")
    plain = Upstream.parse("http://127.0.0.1")
    assert (plain.port, plain.target, plain.authority) == (80, "/", "127.0.0.1")


@pytest.mark.parametrize("url", ["ftp://x/mcp", "127.0.0.1:8000/mcp", "http:///mcp", "http://x:y/"])
def test_an_upstream_that_is_no_http_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="--upstream"):
        Upstream.parse(url)


def test_a_body_is_a_message_its_start_or_nothing() -> None:
    assert parse_body(b'{"jsonrpc": "2.0"}') == ({"jsonrpc": "2.0"}, None)
    assert parse_body(b"  \n") == (None, None)
    assert parse_body("x" * 300) == (None, "x" * 200)


def test_a_capture_line_holds_only_what_was_there() -> None:
    bare = Passed("server", None, None, 2, 5, {"status": 202, "headers": {}})
    assert bare.record(0.5) == {"direction": "server", "t": 0.5, "conn": 2, "exchange": 5,
                                "http": {"status": 202, "headers": {}}}  # fmt: skip
    stdio = Passed("client", {"jsonrpc": "2.0", "method": "x"})
    assert stdio.record(1.25) == {"direction": "client", "message": stdio.message, "t": 1.25}
