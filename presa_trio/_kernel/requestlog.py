"""Which request a log record was written for: the request id and method of the request
being served, in every record logged while serving it (its handler, its child tasks, its
worker threads; a task keeps the id of the request that created it).

``RequestFilter`` adds ``record.request_id`` and ``record.mcp_method`` (``-`` outside a
request) to the records of the handler it is installed on; ``presa-trio serve`` installs it.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import final

#: (request id, method) of the request being served, or None.
CURRENT: ContextVar[tuple[str, str] | None] = ContextVar("presa_trio_request", default=None)


@final
class RequestFilter(logging.Filter):
    """Adds ``request_id`` and ``mcp_method`` to every record it sees (and keeps them all)."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = CURRENT.get()
        record.request_id, record.mcp_method = current if current is not None else ("-", "-")
        return True
