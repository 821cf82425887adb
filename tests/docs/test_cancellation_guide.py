"""docs/cancellation.md names real things: every file it cites exists, every function, class,
method and constant it names is defined (in the file its code map says, where it says one),
every trio, pytest and asyncio name resolves, and presa_trio's public async functions take no
``timeout=`` (as the guide says). So the guide cannot rot as the code moves."""

from __future__ import annotations

import ast
import asyncio
import builtins
import importlib
import inspect
import re
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import hypercorn
import pytest
import trio
import trio.lowlevel
import trio.testing
import trio.to_thread

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "cancellation.md"
GRADER = "tests/cancellation/test_exercises.py"
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^[\w.-]+(/[\w.-]+)+\.(py|md|yml|toml)$")
NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\(\))?$")
MAP_ENTRY = re.compile(r"^- `(?P<path>[^`]+\.py)`(?P<rest>.*?)(?=^- |\Z)", re.MULTILINE | re.DOTALL)
# Variables the guide's prose uses for well-known objects
ALIASES = {
    "ctx": "Context",
    "server": "Server",
    "app": "AsgiApp",
    "runtime": "Runtime",
    "scope": "trio.CancelScope",
    "nursery": "trio.Nursery",
}
MODULES: dict[str, Any] = {
    "trio": trio,
    "pytest": pytest,
    "asyncio": asyncio,
    "hypercorn": hypercorn,
}
PUBLIC_MODULES = [
    "presa_trio",
    "presa_trio.auth",
    "presa_trio.backends",
    "presa_trio.content",
    "presa_trio.errors",
    "presa_trio.ext.tasks",
    "presa_trio.extensions",
    "presa_trio.middleware",
    "presa_trio.mrtr",
    "presa_trio.testing",
]


def prose() -> str:
    return FENCE.sub("", GUIDE.read_text())


def cited() -> list[str]:
    return CODE.findall(prose())


def defined_in(path: Path) -> set[str]:
    """The names a module defines: functions, classes, constants, ``Class.member`` (methods,
    fields, attributes set on ``self``) and every function's parameters."""
    names: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
            names.update(a.arg for a in (*node.args.args, *node.args.kwonlyargs))
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            for item in ast.walk(node):
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{node.name}.{item.name}")
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(f"{node.name}.{item.target.id}")
                elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                    names.add(f"{node.name}.{item.attr}")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


@cache
def presa_names() -> frozenset[str]:
    """What presa_trio and the guide's exercises define, and the strings presa_trio and the
    exercises' grader hold (logger names, environment variables)."""
    found: set[str] = set()
    for path in [*(ROOT / "presa_trio").rglob("*.py"), *(ROOT / "exercises").rglob("*.py")]:
        found |= defined_in(path)
    for path in [*(ROOT / "presa_trio").rglob("*.py"), ROOT / GRADER]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return frozenset(found)


def resolves(dotted: str) -> bool:
    """Whether ``trio.x.y`` (and the like) names a real attribute or module."""
    head, *rest = dotted.split(".")
    target: Any = MODULES.get(head, getattr(builtins, head, None))
    if target is None:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # trio.testing.RaisesGroup
        for i, part in enumerate(rest):
            if hasattr(target, part):
                target = getattr(target, part)
                continue
            try:
                target = importlib.import_module(".".join([head, *rest[: i + 1]]))
            except ImportError:
                return False
    return True


def known(name: str) -> bool | None:
    """True or False for a name the guide can be checked on; None for a plain word."""
    name = name.removesuffix("()")
    head, _, tail = name.partition(".")
    head = ALIASES.get(head, head)
    name = f"{head}.{tail}" if tail else head
    first = name.split(".")[0]
    if first in MODULES or (tail and hasattr(builtins, first)):
        return resolves(name)
    if first == "presa_trio":
        module, _, attribute = name.rpartition(".")
        try:
            return hasattr(importlib.import_module(module), attribute) or name in presa_names()
        except ImportError:
            return name in presa_names()  # a logger's name, say
    if tail and first[0].isupper():  # Class.member
        return name in presa_names() or (first in presa_names() and resolves(f"trio.{name}"))
    if "_" in name and not tail:  # a function, constant, parameter or variable
        return name in presa_names() or name in trio_words()
    return None


@cache
def trio_words() -> frozenset[str]:
    """Attributes and parameters of trio's that the guide names bare."""
    words = set(dir(trio.CancelScope))
    for function in (trio.run, trio.to_thread.run_sync, trio.move_on_after):
        words |= set(inspect.signature(function).parameters)
    return frozenset(words)


def test_every_file_the_guide_cites_exists() -> None:
    missing = []
    for token in cited():
        if not PATH.match(token):
            continue
        if token.startswith("hypercorn/"):
            where = Path(hypercorn.__file__).parents[1] / token
        else:
            where = ROOT / token
        if not where.exists():
            missing.append(token)
    assert missing == []


def test_the_guide_cites_files_at_all() -> None:
    cited_paths = [t for t in cited() if PATH.match(t)]
    assert "presa_trio/ext/tasks/_runner.py" in cited_paths
    assert "tests/cancellation/test_exercises.py" in cited_paths


def test_every_name_the_guide_uses_is_defined() -> None:
    checked = [t for t in cited() if NAME.match(t) and known(t) is not None]
    assert len(checked) > 60  # the check runs on the guide's names, not on nothing
    assert [t for t in checked if not known(t)] == []


def test_the_name_check_can_fail() -> None:
    for wrong in ("TaskRunner.cancel_all", "trio.move_on_before", "_cancel_on_hangup"):
        assert known(wrong) is False
    for right in ("TaskRunner.cancel", "trio.testing.MockClock", "_cancel_on_disconnect"):
        assert known(right) is True


def test_every_code_map_entry_names_what_its_file_defines() -> None:
    section = prose().split("## 10. Where this lives in the code", 1)[1]
    entries = list(MAP_ENTRY.finditer(section))
    assert len(entries) >= 10
    wrong = []
    for entry in entries:
        path = ROOT / entry.group("path")
        assert path.is_file(), entry.group("path")
        names = defined_in(path)
        for name in CODE.findall(entry.group("rest")):
            if PATH.match(name):
                names |= defined_in(ROOT / name)  # a second file in the same entry
            elif NAME.match(name) and name not in names:
                wrong.append(f"{entry.group('path')}: {name}")
    assert wrong == []


def test_no_public_async_function_takes_a_timeout() -> None:
    """The guide says presa_trio's public async functions take no timeout= (section 2)."""
    bounds = {"timeout", "deadline", "timeout_seconds"}
    found = []
    checked = 0
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for exported in getattr(module, "__all__", []):
            value = getattr(module, exported)
            callables = [value]
            if inspect.isclass(value):
                callables = [m for n, m in vars(value).items() if not n.startswith("_")]
            for function in callables:
                function = inspect.unwrap(function) if callable(function) else function
                if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
                    checked += 1
                    named = set(inspect.signature(function).parameters) & bounds
                    if named:
                        found.append(f"{module_name}.{exported}: {sorted(named)}")
    assert checked > 20
    assert found == []
