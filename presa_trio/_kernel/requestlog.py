"""Which request a log record was written for: the request id and method of the request
being served, in every record logged while serving it (its handler, its child tasks, its
worker threads; a task keeps the id of the request that created it).

``RequestFilter`` adds ``record.request_id`` and ``record.mcp_method`` (``-`` outside a
request) to the records of the handler it is installed on; ``presa-trio serve`` installs it.
``log_answered`` writes one info line per answered request on ``presa_trio.requests``, and
costs one level check when info is off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, final

#: (request id, method) of the request being served, or None.
CURRENT: ContextVar[tuple[str, str] | None] = ContextVar("presa_trio_request", default=None)


@final
class RequestFilter(logging.Filter):
    """Adds ``request_id`` and ``mcp_method`` to every record it sees (and keeps them all)."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = CURRENT.get()
        record.request_id, record.mcp_method = current if current is not None else ("-", "-")
        return True


#: One info record per request answered, for a developer watching the server
#: (``presa-trio dev``, or ``--log-level info``): method, what it named, outcome, duration.
REQUESTS = logging.getLogger("presa_trio.requests")
_NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def started() -> float | None:
    """When a request began, if its line will be logged (None: the level is off)."""
    return time.perf_counter() if REQUESTS.isEnabledFor(logging.INFO) else None


def log_answered(
    since: float | None,
    method: str,
    params: Any,
    status: int,
    result: Mapping[str, Any] | None,
    error: Mapping[str, Any] | None,
) -> None:
    """The request's one line: ``tools/call forecast -> ok (200) in 3.1 ms``. A tool result
    with ``isError`` is ``tool error``; a JSON-RPC error names its code and message."""
    if since is None:
        return
    elapsed = (time.perf_counter() - since) * 1000
    named = params.get(_NAMED_BY.get(method, "")) if isinstance(params, Mapping) else None
    what = f"{method} {str(named)[:80]}" if isinstance(named, str) else method
    if error is not None:
        outcome = f"error {error.get('code')} {str(error.get('message'))[:120]}"
    elif result is not None and result.get("isError") is True:
        outcome = "tool error"
    else:
        outcome = "ok"
    REQUESTS.info("%s -> %s (%d) in %.1f ms", what, outcome, status, elapsed)
