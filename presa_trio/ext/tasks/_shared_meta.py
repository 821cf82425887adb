"""One copy of each client's ``_meta`` for the tasks of a run.

A task's detached context keeps the creating request's ``_meta`` for the task's whole life
(the client's capabilities, which ``ctx.input`` checks; its info; its protocol version). A
client sends the same ``_meta`` with every request, so the tasks of one run share one parsed
copy of each distinct value instead of each keeping its own: about 850 bytes per parked task
for the benchmark's small client, more for a client that describes itself at length.
"""

from __future__ import annotations

from typing import Any, final

import orjson

LIMIT = 256  # distinct values kept; past it the oldest is forgotten (its tasks keep theirs)
MAX_BYTES = 4096  # a larger _meta stays with its own tasks; the table keeps a few MB at most


@final
class SharedMetas:
    """The ``_meta`` values of one run's task-creating requests, each kept once."""

    __slots__ = ("_by_value", "_limit", "_max_bytes")

    def __init__(self, limit: int = LIMIT, max_bytes: int = MAX_BYTES) -> None:
        self._limit = limit
        self._max_bytes = max_bytes
        self._by_value: dict[bytes, tuple[Any, Any]] = {}

    def share(self, raw: Any, meta: Any) -> tuple[Any, Any]:
        """``raw`` (a request's ``params._meta``) and ``meta`` (what was read from it, the
        context's ``meta``), or the pair an earlier request with an equal ``_meta`` left, to
        be kept instead. Handlers read ``ctx.params`` (a ``Mapping``); they never write it.

        Equal means equal as JSON, whatever the order of keys. A value orjson cannot write
        (an integer beyond 64 bits) is not shared, nor one larger than ``max_bytes``: the
        table outlives the tasks, so what it keeps stays small whatever clients send.
        """
        try:
            key = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            return raw, meta
        if len(key) > self._max_bytes:
            return raw, meta
        kept = self._by_value.get(key)
        if kept is None:
            if len(self._by_value) >= self._limit:
                del self._by_value[next(iter(self._by_value))]
            kept = self._by_value[key] = (raw, meta)
        return kept

    def __len__(self) -> int:
        return len(self._by_value)
