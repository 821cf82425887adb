"""Run every ``# example:`` block of docs/cancellation.md and docs/porting.md, so the
guides cannot rot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio

DOCS = Path(__file__).resolve().parents[2] / "docs"
GUIDES = {"cancellation.md": 6, "porting.md": 4}  # each guide, and how many examples at least
BLOCK = re.compile(r"```python\n(# example: (?P<name>[\w-]+)\n.*?)```", re.DOTALL)


def examples() -> list[tuple[str, str, str]]:
    found = []
    for guide, least in GUIDES.items():
        text = (DOCS / guide).read_text()
        blocks = [(guide, m.group("name"), m.group(1)) for m in BLOCK.finditer(text)]
        assert len(blocks) >= least, f"{guide} lost its runnable examples"
        found += blocks
    return found


@pytest.mark.parametrize(
    ("guide", "name", "source"), examples(), ids=[f"{g}:{n}" for g, n, _ in examples()]
)
async def test_guide_example(guide: str, name: str, source: str) -> None:
    namespace: dict[str, Any] = {"__name__": f"guide_{name}"}
    exec(compile(source, f"{DOCS / guide}:{name}", "exec"), namespace)
    with trio.fail_after(10):
        await namespace["main"]()
