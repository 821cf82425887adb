"""What an operator learns of the answers a ``tasks/update`` ignored: the debug records on the
``presa_trio.tasks`` logger (the client learns nothing; SEP-2663 asks only for the ack)."""

from __future__ import annotations

import logging

import pytest

LOGGER = "presa_trio.tasks"
MESSAGE = "tasks/update of task %s ignored input keys %s: %s"


def ignored_keys(caplog: pytest.LogCaptureFixture, task_id: str | None = None) -> list[list[str]]:
    """The keys each ``tasks/update`` (of ``task_id``, or of any task) ignored, one list per
    update that ignored any, in the order they were logged. Capture them with
    ``caplog.set_level(logging.DEBUG, logger=LOGGER)``."""
    found = []
    for record in caplog.records:
        if record.name != LOGGER or record.levelno != logging.DEBUG or record.msg != MESSAGE:
            continue
        assert isinstance(record.args, tuple)
        logged_id, keys, _why = record.args
        if task_id is None or logged_id == task_id:
            assert isinstance(keys, list)
            found.append([str(key) for key in keys])
    return found
