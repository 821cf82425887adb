"""The package's shape, read from its imports: its folders are its rings and each imports only
the rings below it, no cycles, a pure core, extensions on the public surface only, and a
server that is only declared loads no transport, auth or shared backend.

Every import counts, also those under ``TYPE_CHECKING`` and inside functions: a cycle hidden
from the interpreter is still a cycle to a reader.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "presa_trio"

# The rings, bottom up: a module imports only from its own ring's folders and those below.
RINGS = [
    ["presa_trio.errors", "presa_trio._boundary", "presa_trio.content"],
    ["presa_trio._protocol", "presa_trio._process"],
    ["presa_trio.auth", "presa_trio._backends", "presa_trio.mrtr"],
    ["presa_trio._handlers"],
    ["presa_trio._kernel"],
    ["presa_trio._transports"],
    ["presa_trio._server", "presa_trio.backends", "presa_trio.extensions", "presa_trio.middleware"],
    ["presa_trio._asgi_driver", "presa_trio._tool_outputs"],
    ["presa_trio._session_client"],
    ["presa_trio._client"],
    ["presa_trio", "presa_trio.testing", "presa_trio.validation"],
    ["presa_trio.ext"],
    # The command line is the outermost edge: its commands may use extensions (tasks).
    ["presa_trio._cli", "presa_trio._cli_client", "presa_trio._proxy", "presa_trio.__main__"],
]
# Modules that must never import trio (or anything that does I/O): values in, values out.
PURE = [
    "presa_trio.errors",
    "presa_trio.content",
    "presa_trio._protocol.tokens",
    "presa_trio._protocol.jsonrpc",
    "presa_trio._protocol.dialect",
    "presa_trio._protocol.era",
    "presa_trio._protocol.headers",
    "presa_trio._protocol.sse",
    "presa_trio._protocol.schema",
    "presa_trio._protocol.request_state",
    "presa_trio._protocol.input_requests",
    "presa_trio._handlers.typeschema",
    "presa_trio._handlers.adapt",
    "presa_trio._handlers.convert",
    "presa_trio._handlers.results",
    "presa_trio._protocol.capture",
    "presa_trio._protocol.capture_records",
    "presa_trio._protocol.capture_state",
    "presa_trio._protocol.capture_requests",
    "presa_trio._protocol.capture_notifications",
    "presa_trio._protocol.capture_responses",
    "presa_trio._protocol.capture_http",
    "presa_trio._protocol.catalog",
    "presa_trio._protocol.declared_tools",
    "presa_trio._protocol.findings",
    "presa_trio._protocol.http_rules",
    "presa_trio._protocol.leaves",
    "presa_trio._protocol.traffic",
    "presa_trio.ext.tasks._states",
    "presa_trio.ext.tasks._wire",
    "presa_trio.auth._challenge",
    "presa_trio.auth._metadata",
    "presa_trio._client.wire",
    "presa_trio._client.arguments",
    "presa_trio._proxy.frames",
    "presa_trio._client.checks",
]
# What an extension written outside this repository could import.
PUBLIC = {
    "presa_trio",
    "presa_trio.errors",
    "presa_trio.extensions",
    "presa_trio.backends",
    "presa_trio.middleware",
    "presa_trio.mrtr",
    "presa_trio.content",
    "presa_trio.testing",
    "presa_trio.validation",
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
    assert seen <= set(PURE) | {"presa_trio._protocol"}, seen - set(PURE)


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith("presa_trio.ext.tasks")))
def test_the_tasks_extension_uses_only_the_public_surface(name: str) -> None:
    own = {m for m in first_party(name) if not m.startswith("presa_trio.ext.tasks")}
    assert own <= PUBLIC, own - PUBLIC


def ring(name: str) -> tuple[int, str]:
    """The ring of module ``name`` and the place (folder or module) that puts it there."""
    places = [(i, place) for i, group in enumerate(RINGS) for place in group]
    found = [(i, p) for i, p in places if name == p or name.startswith(p + ".")]
    assert found, f"{name} is in no ring: add its folder to RINGS"
    return max(found, key=lambda found: len(found[1]))


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_imports_only_its_own_ring_and_those_below(name: str) -> None:
    level, _ = ring(name)
    above = {m: ring(m) for m in first_party(name) if ring(m)[0] > level}
    assert not above, f"{name} (ring {level}) imports from outer rings: {above}"


def test_the_kernel_sees_auth_only_through_its_own_protocol() -> None:
    kernel = [m for m in MODULES if m.startswith("presa_trio._kernel")]
    reached = {(m, d) for m in kernel for d in first_party(m) if d.startswith("presa_trio.auth")}
    assert not reached


def test_a_declared_server_loads_no_transport_auth_or_shared_backend() -> None:
    """An embedding that declares a server (and runs it on memory) pays for nothing else."""
    program = (
        "import sys\n"
        "from presa_trio import Server\n"
        "server = Server('embedded')\n"
        "server.tool(name='ok')(lambda: 'ok')\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(done.stdout.split())
    assert "presa_trio._server" in loaded  # the program ran
    unwanted = {
        m
        for m in loaded
        if m.startswith(("presa_trio._transports", "presa_trio.auth", "presa_trio._process"))
        or m in ("presa_trio._backends.sql", "presa_trio._backends.sqlite", "hypercorn", "h11")
        or m.startswith("presa_trio._backends.postgres")
    }
    assert not unwanted


def test_the_unit_tests_are_pure_and_sync() -> None:
    """tests/unit/ holds what runs without trio: no async test, no fixture of the trio run."""
    here = Path(__file__).resolve().parent
    found = [
        f"{path.name}:{node.name}"
        for path in sorted(here.glob("test_*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.AsyncFunctionDef) and node.name.startswith("test_")
    ]
    assert not found
