"""The tasks of a run keep one copy of each distinct ``_meta`` (SharedMetas)."""

from __future__ import annotations

from typing import Any

from presa_trio._protocol.dialect import read_meta
from presa_trio.ext.tasks._shared_meta import SharedMetas

CAPS = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def meta_of(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": dict(CAPS),
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
        **extra,
    }


def share(metas: SharedMetas, raw: dict[str, Any]) -> tuple[Any, Any]:
    return metas.share(raw, read_meta({"_meta": raw}))


def test_an_equal_meta_is_kept_once_whatever_its_key_order() -> None:
    metas = SharedMetas()
    first, first_read = share(metas, meta_of())
    again = dict(reversed(list(meta_of().items())))
    kept, kept_read = share(metas, again)
    assert kept is first and kept_read is first_read and len(metas) == 1
    assert kept == again and kept_read == read_meta({"_meta": again})


def test_a_different_meta_is_its_own() -> None:
    metas = SharedMetas()
    first, _ = share(metas, meta_of())
    other = meta_of(progressToken=7)
    kept, kept_read = share(metas, other)
    assert kept is other and kept is not first and kept_read.progress_token == 7
    one, two = share(metas, meta_of(x=1)), share(metas, meta_of(x=1.0))
    assert one[0] is not two[0] and len(metas) == 4  # 1 and 1.0 are different JSON


def test_past_its_limit_the_oldest_value_is_forgotten() -> None:
    metas = SharedMetas(limit=2)
    a, b = meta_of(n=1), meta_of(n=2)
    share(metas, a)
    share(metas, b)
    share(metas, meta_of(n=3))
    assert len(metas) == 2
    assert share(metas, meta_of(n=2))[0] is b  # still kept
    assert share(metas, meta_of(n=1))[0] is not a  # forgotten: the new copy is kept instead


def test_a_meta_orjson_cannot_write_is_not_shared() -> None:
    metas = SharedMetas()
    raw = meta_of(big=2**70)
    kept, _ = share(metas, raw)
    assert kept is raw and len(metas) == 0
    assert share(metas, meta_of(big=2**70))[0] is not raw


def test_a_large_meta_is_not_kept_by_the_table() -> None:
    metas = SharedMetas(max_bytes=300)
    small, large = meta_of(note="x" * 10), meta_of(note="x" * 300)
    assert share(metas, small)[0] is small and len(metas) == 1
    kept, kept_read = share(metas, large)
    assert kept is large and kept_read.client_info == {"name": "c", "version": "1"}
    assert len(metas) == 1 and share(metas, meta_of(note="x" * 300))[0] is not large
