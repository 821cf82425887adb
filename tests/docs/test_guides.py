"""Run every ``# example:`` block of the documentation (README.md and the pages under docs/),
so the pages cannot rot; and account for every other Python block: it is run by a test of
its own (its marker names it), or it says it is a fragment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# each page, and how many examples at least
GUIDES = {
    "docs/cancellation.md": 21,
    "docs/porting.md": 5,
    "docs/tutorial.md": 4,
    "docs/guides/tools.md": 3,
    "docs/guides/context.md": 3,
    "docs/guides/tasks.md": 2,
    "docs/guides/listen.md": 1,
    "docs/guides/testing.md": 5,
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
# An example that defines CLOCK (a MockClock) runs as trio.run(main, clock=CLOCK).
ON_ITS_CLOCK = re.compile(r"^CLOCK = ", re.MULTILINE)
VIRTUAL_BOUND = 24 * 3600  # seconds on a mock clock: an example stuck for good fails here


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


def load(guide: str, name: str, source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"guide_{name}"}
    # dont_inherit: an example runs as written, without this module's __future__ import
    exec(compile(source, f"{ROOT / guide}:{name}", "exec", dont_inherit=True), namespace)
    return namespace


REAL_TIME = [found for found in examples() if not ON_ITS_CLOCK.search(found[2])]
MOCK_TIME = [found for found in examples() if ON_ITS_CLOCK.search(found[2])]


@pytest.mark.parametrize(
    ("guide", "name", "source"), REAL_TIME, ids=[f"{g}:{n}" for g, n, _ in REAL_TIME]
)
async def test_guide_example(guide: str, name: str, source: str) -> None:
    namespace = load(guide, name, source)
    with trio.fail_after(10):
        await namespace["main"]()


@pytest.mark.parametrize(
    ("guide", "name", "source"), MOCK_TIME, ids=[f"{g}:{n}" for g, n, _ in MOCK_TIME]
)
def test_guide_example_on_its_mock_clock(guide: str, name: str, source: str) -> None:
    """As a reader runs it: ``trio.run(main, clock=CLOCK)``, with autojump."""
    namespace = load(guide, name, source)
    clock = namespace["CLOCK"]
    assert isinstance(clock, trio.testing.MockClock) and clock.autojump_threshold == 0

    async def watchdog() -> None:  # a sibling, not a scope: main sees no deadline of ours
        await trio.sleep(VIRTUAL_BOUND)
        raise AssertionError(f"{name} was still running after {VIRTUAL_BOUND} s")

    async def bounded() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watchdog)
            await namespace["main"]()
            nursery.cancel_scope.cancel()

    trio.run(bounded, clock=clock)


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
