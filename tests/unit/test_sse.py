"""Unit tests for presa_trio._protocol.sse: event framing."""

from __future__ import annotations

from presa_trio._protocol.jsonrpc import encode, notification_message
from presa_trio._protocol.sse import HEADERS, KEEPALIVE, event


def test_event_framing() -> None:
    assert event(b'{"a":1}') == b'event: message\ndata: {"a":1}\n\n'


def test_event_of_an_encoded_message_has_one_data_line() -> None:
    data = encode(notification_message("notifications/message", {"data": "a\nb\r\nc", "x": "é"}))
    framed = event(data)
    lines = framed.split(b"\n")
    assert lines == [b"event: message", b"data: " + data, b"", b""]
    assert sum(line.startswith(b"data:") for line in lines) == 1
    assert not any(line.startswith(b"id:") for line in lines)
    assert b"\r" not in framed


def test_keepalive_is_a_comment() -> None:
    assert KEEPALIVE == b": keep-alive\n\n"


def test_headers() -> None:
    assert dict(HEADERS) == {
        b"content-type": b"text/event-stream",
        b"cache-control": b"no-cache",
        b"x-accel-buffering": b"no",
    }
    assert len(HEADERS) == 3
    assert all(name == name.lower() for name, _ in HEADERS)
