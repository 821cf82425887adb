"""Server-sent events framing for response and listen streams (wire §13.3).

One event per message, ``data:`` on a single line, no ``id:`` lines: 2026-07-28 streams
are not resumable. It frames bytes; it does not decide when a stream starts.
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
