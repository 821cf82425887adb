"""Server-sent events framing for response and listen streams (wire §13.3).

One event per message, ``data:`` on a single line. 2026-07-28 streams are not resumable:
their events carry no ``id:``. An older-era session's resumable stream (2025-11-25) names
each event (``logged``) and opens with a priming event, an id and empty data, with the
``retry:`` a client waits before it reconnects. It frames bytes; it does not decide when a
stream starts.
"""

from __future__ import annotations

KEEPALIVE = b": keep-alive\n\n"

HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def event(data: bytes) -> bytes:
    """Frame one compact JSON message; ``data`` must hold no newline."""
    return b"event: message\ndata: " + data + b"\n\n"


def logged(data: bytes, event_id: str) -> bytes:
    """Frame one message of a resumable stream, named ``event_id`` (``Last-Event-ID``)."""
    return b"id: " + event_id.encode("ascii") + b"\nevent: message\ndata: " + data + b"\n\n"


def priming(event_id: str, retry_ms: int) -> bytes:
    """The first event of a resumable stream: an id to reconnect with, empty data, and the
    milliseconds a client waits before reconnecting (SEP-1699)."""
    return b"id: %s\nretry: %d\ndata: \n\n" % (event_id.encode("ascii"), retry_ms)
