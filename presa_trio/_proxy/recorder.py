"""The proxy's record of what passed: each message (or bare HTTP exchange) becomes one capture
line, checked at once by the capture checker, its findings printed as they are found.

One ``Recorder`` per run, shared by every connection: lines are numbered, written and flushed
in the order the proxy saw them. What it does not do: forward anything, or judge a message
itself beyond noticing that it is not JSON (the checker holds every rule).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

import trio

from .._protocol.capture import CaptureChecker, Finding

#: Header values never written to a capture: credentials, which a capture shared in a bug
#: report must not leak.
REDACTED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
REDACTED = "[redacted]"
BODY_SAMPLE = 200  # characters of a non-JSON body kept on its line
PREFIX = "presa-trio proxy: "


def header_map(headers: Iterable[tuple[bytes | str, bytes | str]]) -> dict[str, str]:
    """HTTP headers as a capture writes them: names lowercased, repeated ones joined with
    ``, ``, credentials redacted."""
    found: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = (raw_name.decode("latin-1") if isinstance(raw_name, bytes) else raw_name).lower()
        value = raw_value.decode("latin-1") if isinstance(raw_value, bytes) else raw_value
        if name in REDACTED_HEADERS:
            value = REDACTED
        found[name] = f"{found[name]}, {value}" if name in found else value
    return found


@dataclass
class Passed:
    """One thing that passed the proxy, before it is numbered: a message or a bare exchange."""

    direction: str  # "client" | "server"
    message: Any = None  # the JSON-RPC message; None when the exchange carried none
    body: str | None = None  # a body that was not JSON (its start), when there was one
    conn: int | None = None
    exchange: int | None = None
    http: dict[str, Any] | None = None
    sse: dict[str, str] = field(default_factory=dict)

    def record(self, t: float) -> dict[str, Any]:
        line: dict[str, Any] = {"direction": self.direction}
        if self.message is not None:
            line["message"] = self.message
        if self.body is not None:
            line["body"] = self.body
        line["t"] = round(t, 6)
        if self.conn is not None:
            line["conn"] = self.conn
        if self.exchange is not None:
            line["exchange"] = self.exchange
        if self.http is not None:
            line["http"] = self.http
        if self.sse:
            line["sse"] = self.sse
        return line


def parse_body(raw: bytes | str) -> tuple[Any, str | None]:
    """``(message, None)`` for a JSON body, ``(None, its start)`` for any other text, and
    ``(None, None)`` for an empty one."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    if not text.strip():
        return None, None
    try:
        return json.loads(text), None
    except ValueError:
        return None, text[:BODY_SAMPLE]


class Recorder:
    """Numbers, writes and checks every line; counts what the checker found."""

    def __init__(self, capture: TextIO | None, *, quiet: bool = False) -> None:
        self._capture = trio.wrap_file(capture) if capture is not None else None
        self._quiet = quiet
        self._checker = CaptureChecker()
        self._lock = trio.Lock()  # one line at a time: numbers follow the order seen
        self._start = trio.current_time()
        self.lines = 0
        self.findings = 0

    async def record(self, passed: Passed) -> None:
        """Write ``passed`` as the next line and check it. Shielded: a line the proxy saw
        is written whole and checked even when its request is being cancelled (a write to
        a local file is quick)."""
        with trio.CancelScope(shield=True):
            await self._record(passed)

    async def _record(self, passed: Passed) -> None:
        async with self._lock:
            self.lines += 1
            line = json.dumps(passed.record(trio.current_time() - self._start), ensure_ascii=False)
            if self._capture is not None:
                await self._capture.write(line + "\n")
                await self._capture.flush()
            findings = list(self._checker.check_line(self.lines, line))
            if passed.message is None and passed.body is not None and _json_expected(passed):
                findings.append(Finding(self.lines, "JSON", "", "the body is not JSON"))
            for finding in findings:
                self.findings += 1
                if not self._quiet:
                    say(str(finding))

    def summary(self) -> str:
        return f"{self.lines} line(s) recorded, {self.findings} finding(s)"


def _json_expected(passed: Passed) -> bool:
    """A body that should have been a JSON-RPC message: an SSE event's data, a stdio line,
    or an HTTP body labelled JSON."""
    if passed.sse or passed.http is None:
        return True
    headers: Mapping[str, str] = passed.http.get("headers", {})
    return headers.get("content-type", "").startswith("application/json")


def say(text: str) -> None:
    """One line on stderr, prefixed, at once, in one write: a spawned server's stderr is the
    same pipe, and ``print`` would let its output in between the text and the newline."""
    sys.stderr.write(f"{PREFIX}{text}\n")
    sys.stderr.flush()
