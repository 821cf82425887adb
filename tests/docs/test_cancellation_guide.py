"""Run every ``# example:`` block of docs/cancellation.md, so the guide cannot rot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "cancellation.md"
BLOCK = re.compile(r"```python\n(# example: (?P<name>[\w-]+)\n.*?)```", re.DOTALL)


def examples() -> list[tuple[str, str]]:
    found = [(m.group("name"), m.group(1)) for m in BLOCK.finditer(GUIDE.read_text())]
    assert len(found) >= 6, "the guide lost its runnable examples"
    return found


@pytest.mark.parametrize(("name", "source"), examples(), ids=[name for name, _ in examples()])
async def test_guide_example(name: str, source: str) -> None:
    namespace: dict[str, Any] = {"__name__": f"guide_{name}"}
    exec(compile(source, f"{GUIDE}:{name}", "exec"), namespace)
    with trio.fail_after(10):
        await namespace["main"]()
