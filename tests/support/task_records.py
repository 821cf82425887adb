"""The task record factory the Tasks unit tests share."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from presa_trio.ext.tasks._states import Status, TaskRecord

T0 = 1_700_000_000_000


def record(task_id: str = "t-1", *, created_ms: int = T0, **changes: Any) -> TaskRecord:
    """A working task created at ``created_ms``; ``changes`` replace any field."""
    base = TaskRecord(
        task_id=task_id,
        principal="s",
        tool="deploy",
        status=Status.WORKING,
        created_ms=created_ms,
        updated_ms=created_ms,
        ttl_ms=60_000,
        poll_interval_ms=1_000,
    )
    return replace(base, **changes)
