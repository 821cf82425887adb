"""The public surface, httpx-style: every public namespace exports exactly what it holds.

Each namespace's ``__all__`` is sorted, complete (every public class or function it defines or
re-exports is listed) and exact (every listed name exists); internals stay out of it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from types import ModuleType

import pytest

import presa_trio
from presa_trio import errors

NAMESPACES = [
    "presa_trio",
    "presa_trio.auth",
    "presa_trio.content",
    "presa_trio.errors",
    "presa_trio.extensions",
    "presa_trio.middleware",
    "presa_trio.mrtr",
    "presa_trio.testing",
    "presa_trio.validation",
    "presa_trio.ext.tasks",
    "presa_trio.ext.tasks.testing",
]
NEVER_EXPORTED = {"Method", "TaskRunner", "TaskHandle", "Dispatcher"}


def module(name: str) -> ModuleType:
    return importlib.import_module(name)


def isort_style_key(name: str) -> tuple[int, list[tuple[int, int | str]]]:
    """The order ruff's RUF022 keeps ``__all__`` in: CONSTANTS, then Classes, then the rest,
    each group in natural order (so the linter and this test agree)."""
    group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    parts = [(1, int(p)) if p.isdigit() else (0, p) for p in re.split(r"(\d+)", name) if p]
    return group, parts  # type: ignore[return-value]


def reexported(namespace: ModuleType) -> set[str]:
    """Names re-exported with the ``from ._x import Name as Name`` idiom, also those a
    namespace loads when first named (re-exported under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(inspect.getsource(namespace))
    body = [*tree.body]
    body += [n for node in tree.body if isinstance(node, ast.If) for n in node.body]
    return {
        alias.name
        for node in body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }


def public_members(namespace: ModuleType) -> set[str]:
    """Every public class or function a namespace defines, and every name it re-exports."""
    found = reexported(namespace)
    for name, value in vars(namespace).items():
        if name.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if value.__module__ == namespace.__name__:
            found.add(name)
    return found


@pytest.mark.parametrize("name", NAMESPACES)
def test_all_is_sorted_and_unique(name: str) -> None:
    names = list(module(name).__all__)
    assert names == sorted(names, key=isort_style_key)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", NAMESPACES)
def test_all_is_complete_and_exact(name: str) -> None:
    namespace = module(name)
    exported = set(namespace.__all__)
    assert all(hasattr(namespace, n) for n in exported)
    assert not [n for n in exported if n.startswith("_")]
    assert public_members(namespace) == exported


@pytest.mark.parametrize("name", NAMESPACES)
def test_internals_are_never_exported(name: str) -> None:
    assert not NEVER_EXPORTED & set(module(name).__all__)


def test_star_import_matches_all() -> None:
    namespace: dict[str, object] = {}
    exec("from presa_trio import *", namespace)
    namespace.pop("__builtins__")
    assert sorted(namespace) == sorted(presa_trio.__all__)


def test_key_names_are_exported() -> None:
    for name in ("Server", "Context", "Runtime", "serve_stdio", "McpError", "ToolError"):
        assert name in presa_trio.__all__
    assert presa_trio.PROTOCOL_VERSION == "2026-07-28"
    assert presa_trio.McpError is errors.McpError
    assert presa_trio.ToolError is errors.ToolError
    assert "Extension" in module("presa_trio.extensions").__all__
    assert "check_task_store" in module("presa_trio.ext.tasks.testing").__all__


@pytest.mark.parametrize(
    "cls",
    [
        presa_trio.Server,
        presa_trio.Context,
        presa_trio.Runtime,
        presa_trio.AsgiApp,
        presa_trio.Schemas,
        presa_trio.KeyRing,
        presa_trio.HostPolicy,
        presa_trio.Limits,
        presa_trio.Listing,
        presa_trio.RequestState,
        presa_trio.Timeouts,
        presa_trio.Validation,
        presa_trio.Param,
        presa_trio.ToolResult,
        module("presa_trio.extensions").ExtensionContext,
        module("presa_trio.extensions").Route,
        module("presa_trio.ext.tasks").TasksExtension,
        module("presa_trio.ext.tasks").MemoryTaskStore,
        module("presa_trio.testing").Client,
        module("presa_trio.auth").AccessToken,
        module("presa_trio.auth").BearerAuth,
        module("presa_trio.auth").JwtVerifier,
    ],
    ids=lambda c: c.__name__,
)
def test_concrete_public_classes_are_final(cls: type) -> None:
    assert getattr(cls, "__final__", False) is True


def test_the_tasks_limits_keep_their_old_name_with_a_warning() -> None:
    """``presa_trio.ext.tasks.Limits`` is now ``TaskLimits`` (``presa_trio.Limits`` is the
    server's): the old name still works, and says so."""
    tasks = module("presa_trio.ext.tasks")
    with pytest.warns(DeprecationWarning, match="use presa_trio.ext.tasks.TaskLimits"):
        old = tasks.Limits
    assert old is tasks.TaskLimits
    with pytest.warns(DeprecationWarning):
        exec("from presa_trio.ext.tasks import Limits", {})
    assert "Limits" not in tasks.__all__
