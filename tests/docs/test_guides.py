"""Run every ``# example:`` block of docs/cancellation.md, docs/porting.md and the README,
so the guides cannot rot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# each guide, and how many examples at least
GUIDES = {"docs/cancellation.md": 6, "docs/porting.md": 5, "README.md": 1}
BLOCK = re.compile(r"```python\n(# example: (?P<name>[\w-]+)\n.*?)```", re.DOTALL)


def examples() -> list[tuple[str, str, str]]:
    found = []
    for guide, least in GUIDES.items():
        text = (ROOT / guide).read_text()
        blocks = [(guide, m.group("name"), m.group(1)) for m in BLOCK.finditer(text)]
        assert len(blocks) >= least, f"{guide} lost its runnable examples"
        found += blocks
    return found


@pytest.mark.parametrize(
    ("guide", "name", "source"), examples(), ids=[f"{g}:{n}" for g, n, _ in examples()]
)
async def test_guide_example(guide: str, name: str, source: str) -> None:
    namespace: dict[str, Any] = {"__name__": f"guide_{name}"}
    # dont_inherit: an example runs as written, without this module's __future__ import
    exec(compile(source, f"{ROOT / guide}:{name}", "exec", dont_inherit=True), namespace)
    with trio.fail_after(10):
        await namespace["main"]()
