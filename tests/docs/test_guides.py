"""Run every ``# example:`` block of the documentation (README.md and the pages under docs/),
so the pages cannot rot; and account for every other Python block: it is run by a test of
its own (its marker names it), or it says it is a fragment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# each page, and how many examples at least
GUIDES = {
    "docs/cancellation.md": 6,
    "docs/porting.md": 5,
    "docs/tutorial.md": 4,
    "docs/guides/tools.md": 3,
    "docs/guides/context.md": 3,
    "docs/guides/tasks.md": 2,
    "docs/guides/listen.md": 1,
    "docs/guides/testing.md": 2,
    "docs/guides/sessions.md": 3,
    "docs/guides/auth.md": 1,
    "docs/guides/observability.md": 1,
    "docs/guides/limits.md": 1,
    "docs/guides/middleware.md": 3,
    "docs/guides/composition.md": 1,
    "docs/reference/errors.md": 1,
}
BLOCK = re.compile(r"```python\n(# example: (?P<name>[\w-]+)\n.*?)```", re.DOTALL)
ANY_BLOCK = re.compile(r"(?:<!-- (?P<marker>[\w-]+) -->\n)?```python\n(?P<first>[^\n]*)\n")
# A block some other test runs: its first line names it, and so does that test.
RUN_ELSEWHERE = re.compile(r"# (?P<kind>[\w-]+) example: (?P<name>[\w-]+)$")
FILE_BLOCK = re.compile(r"# (?P<name>[\w]+\.py)$")  # a file a test writes out and runs


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


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


def test_every_page_with_examples_is_run() -> None:
    with_examples = {
        str(page.relative_to(ROOT)) for page in pages() if BLOCK.search(page.read_text())
    }
    assert with_examples <= set(GUIDES)


def test_every_python_block_runs_or_says_it_is_a_fragment() -> None:
    tests = "\n".join(p.read_text() for p in TESTS.rglob("*.py"))
    unaccounted = []
    for page in pages():
        for block in ANY_BLOCK.finditer(page.read_text()):
            first, marker = block.group("first"), block.group("marker")
            where = f"{page.relative_to(ROOT)}: {first}"
            if first.startswith("# example: ") or first.startswith("# fragment"):
                continue
            if marker is not None:  # <!-- name --> before the block: a test reads it by name
                if marker not in tests:
                    unaccounted.append(where)
                continue
            if found := RUN_ELSEWHERE.match(first):
                kind, name = found.group("kind", "name")
                if f"# {kind} example: " not in tests or name not in tests:
                    unaccounted.append(where)
                continue
            if found := FILE_BLOCK.match(first):
                if f"# {found.group('name')}" not in tests:
                    unaccounted.append(where)
                continue
            unaccounted.append(where)
    assert unaccounted == []
