"""The package's shape, read from its imports: no cycles, a pure core, extensions on the
public surface only.

Every import counts, also those under ``TYPE_CHECKING`` and inside functions: a cycle hidden
from the interpreter is still a cycle to a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "presa_trio"

# Modules that must never import trio (or anything that does I/O): values in, values out.
PURE = [
    "presa_trio.errors",
    "presa_trio.content",
    "presa_trio._wire.jsonrpc",
    "presa_trio._wire.dialect",
    "presa_trio._wire.admission",
    "presa_trio._wire.headers",
    "presa_trio._wire.sse",
    "presa_trio._schema",
    "presa_trio._request_state",
    "presa_trio._mrtr",
    "presa_trio._typeschema",
    "presa_trio._adapt",
    "presa_trio._convert",
    "presa_trio._results",
    "presa_trio._validate",
    "presa_trio.ext.tasks._states",
    "presa_trio.ext.tasks._wire",
    "presa_trio.auth._token",
    "presa_trio.auth._challenge",
    "presa_trio.auth._metadata",
]
# What an extension written outside this repository could import.
PUBLIC = {
    "presa_trio",
    "presa_trio.errors",
    "presa_trio.extensions",
    "presa_trio.backends",
    "presa_trio.mrtr",
    "presa_trio.content",
    "presa_trio.testing",
    "presa_trio.auth",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> set[str]:
    """The modules ``name`` imports, resolved to module names (first party and third)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return found


def first_party(name: str) -> set[str]:
    return {m for m in imports(name) if m in MODULES and m != name}


def test_the_import_graph_has_no_cycle() -> None:
    graph = {name: first_party(name) for name in MODULES}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


@pytest.mark.parametrize("name", PURE)
def test_the_pure_core_does_no_io(name: str) -> None:
    seen: set[str] = set()
    todo = [name]
    while todo:  # transitively: a pure module may only lean on pure modules
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        outside = {m.partition(".")[0] for m in imports(current) if m not in MODULES}
        assert not outside & {"trio", "socket", "asyncio", "hypercorn", "h11"}, current
        todo.extend(first_party(current))
    assert seen <= set(PURE) | {"presa_trio._wire"}, seen - set(PURE)


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith("presa_trio.ext.tasks")))
def test_the_tasks_extension_uses_only_the_public_surface(name: str) -> None:
    own = {m for m in first_party(name) if not m.startswith("presa_trio.ext.tasks")}
    assert own <= PUBLIC, own - PUBLIC
