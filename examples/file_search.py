"""A file search, ported from an SDK server: progress while it walks, a sync helper that reads
files in a worker thread, typed arguments with constraints and a typed, structured result.

Serve it with ``presa-trio serve examples.file_search:server --http 127.0.0.1:8000``; it
searches below ``$FILE_SEARCH_ROOT`` (the current directory when unset).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import trio
from pydantic import Field

from presa_trio import Context, Server, ToolError

server = Server("file-search", version="1.0.0")


@dataclass
class Match:
    path: str
    line: int
    text: str


def search_root() -> Path:
    return Path(os.environ.get("FILE_SEARCH_ROOT", ".")).resolve()


def below_root(relative: Path) -> Path:
    """``relative`` inside the search root; anything that would leave it is refused."""
    root = search_root()
    target = (root / relative).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"{relative} is outside the search root")
    return target


def grep_file(path: Path, needle: str, limit: int) -> list[tuple[int, str]]:
    """The sync helper: plain blocking file reading, run in a worker thread by the tool."""
    found: list[tuple[int, str]] = []
    try:
        with path.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                if needle in line:
                    found.append((number, line.rstrip("\n")))
                    if len(found) == limit:
                        break
    except OSError:
        pass  # unreadable files are skipped, as grep -s does
    return found


@server.tool()
async def search(
    ctx: Context,
    needle: Annotated[str, Field(min_length=1, description="Text to look for")],
    directory: Path = Path("."),
    suffixes: set[str] = {".py", ".md", ".txt"},  # noqa: B006 (read only)
    max_results: Annotated[int, Field(ge=1, le=200)] = 50,
) -> list[Match]:
    """Finds lines containing ``needle`` in files below ``directory``."""
    top = below_root(directory)
    files = sorted(p for p in top.rglob("*") if p.is_file() and p.suffix in suffixes)
    matches: list[Match] = []
    for done, path in enumerate(files, 1):
        remaining = max_results - len(matches)
        found = await trio.to_thread.run_sync(grep_file, path, needle, remaining)
        relative = str(path.relative_to(search_root()))
        matches += [Match(relative, number, text) for number, text in found]
        await ctx.progress(done, len(files), relative)
        if len(matches) >= max_results:
            break
    return matches


@server.tool()
def count_lines(path: Path) -> int:
    """Counts the lines of one file (a sync tool: it runs in a worker thread)."""
    with below_root(path).open("rb") as lines:
        return sum(1 for _ in lines)


app = server.asgi_app()
