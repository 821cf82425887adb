"""Bytes to frames for the proxy: server-sent events with their ``id:`` and ``event:``, and
the newline-delimited lines of stdio, each kept byte for byte.

Pure (h11's way): chunks in, complete frames out. It only splits; the proxy forwards the
bytes it was given unchanged and records the frames. Spec 2026-07-28 wire §13.3 (SSE) and
§14 (stdio); the SSE field rules of the HTML Living Standard's event-stream format.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its ``data:`` lines joined, and its ``id:`` and ``event:`` when
    it had them. A comment-only frame (a keep-alive) is no event."""

    data: str
    event_id: str | None = None
    name: str | None = None
    retry: bool = False  # it carried a ``retry:`` field (a priming event does)


class SseSplitter:
    """A ``text/event-stream`` body in, its events out, however the chunks fall."""

    def __init__(self) -> None:
        self._buffer = ""
        self._pending_cr = False
        # A character's bytes may be split between chunks: decode across them.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk: bytes) -> list[SseEvent]:
        text = self._decoder.decode(chunk)
        if not text:
            return []
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the second half of a CRLF split across chunks
        self._pending_cr = text.endswith("\r")
        self._buffer += text.replace("\r\n", "\n").replace("\r", "\n")
        events = []
        while "\n\n" in self._buffer:
            frame, self._buffer = self._buffer.split("\n\n", 1)
            event = _event(frame)
            if event is not None:
                events.append(event)
        return events


def _event(frame: str) -> SseEvent | None:
    data: list[str] = []
    event_id = name = None
    retry = seen = False
    for line in frame.split("\n"):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        seen = True
        if field == "data":
            data.append(value)
        elif field == "id":
            event_id = value
        elif field == "event":
            name = value
        elif field == "retry":
            retry = True
    return SseEvent("\n".join(data), event_id, name, retry) if seen else None


class LineSplitter:
    """Bytes of a stdio stream in, its lines out, each with its newline as it came.

    A line longer than ``max_line`` is given in pieces of that size (``whole`` False) so that
    the proxy never holds more than ``max_line`` bytes; ``close`` gives an unterminated rest.
    """

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._cut = False  # the line being read already had a piece given out

    def feed(self, chunk: bytes) -> list[tuple[bytes, bool]]:
        """The lines (or pieces) ``chunk`` completes: ``(bytes, whole)``."""
        self._buffer += chunk
        out: list[tuple[bytes, bool]] = []
        while True:
            end = self._buffer.find(b"\n")
            if end == -1:
                if len(self._buffer) > self.max_line:
                    out.append((bytes(self._buffer), False))
                    self._buffer.clear()
                    self._cut = True
                return out
            line = bytes(self._buffer[: end + 1])
            del self._buffer[: end + 1]
            out.append((line, not self._cut))
            self._cut = False

    def close(self) -> list[tuple[bytes, bool]]:
        rest = bytes(self._buffer)
        self._buffer.clear()
        return [(rest, not self._cut)] if rest else []
