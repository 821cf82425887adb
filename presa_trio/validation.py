"""Check captured MCP traffic against the protocol's schemas: the engine behind ``presa-trio
validate``, for your own tools (a proxy, a CI step, a test).

A capture is JSON lines: bare JSON-RPC messages, or records with the direction, HTTP status and
headers of each message (see the testing guide). ``CaptureChecker`` remembers what earlier
lines said (the negotiated version, the requests in flight, the tools declared), so feed it a
capture's lines in order; ``check_capture`` checks a whole capture at once. It reads no file
and opens no connection.
"""

from __future__ import annotations

from ._protocol.capture import CaptureChecker as CaptureChecker
from ._protocol.capture import check_capture as check_capture
from ._protocol.catalog import VERSIONS as VERSIONS
from ._protocol.findings import RULES as RULES
from ._protocol.findings import Finding as Finding

__all__ = ["RULES", "VERSIONS", "CaptureChecker", "Finding", "check_capture"]
