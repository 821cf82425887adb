"""Unit tests for the public surface: ``presa_trio.__all__`` and the public submodules."""

from __future__ import annotations

import re
from types import ModuleType

import pytest

import presa_trio
from presa_trio import errors, mrtr


def isort_style_key(name: str) -> tuple[int, list[tuple[int, int | str]]]:
    """The order ruff's RUF022 keeps ``__all__`` in: CONSTANTS, then Classes, then the rest,
    each group in natural order (so the linter and this test agree)."""
    group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    parts = [(1, int(p)) if p.isdigit() else (0, p) for p in re.split(r"(\d+)", name) if p]
    return group, parts  # type: ignore[return-value]


@pytest.mark.parametrize("module", [presa_trio, errors, mrtr], ids=lambda m: m.__name__)
def test_all_is_sorted(module: ModuleType) -> None:
    names = list(module.__all__)
    assert names == sorted(names, key=isort_style_key)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("module", [presa_trio, errors, mrtr], ids=lambda m: m.__name__)
def test_every_exported_name_exists(module: ModuleType) -> None:
    for name in module.__all__:
        assert hasattr(module, name), name


@pytest.mark.parametrize("module", [presa_trio, errors, mrtr], ids=lambda m: m.__name__)
def test_no_private_name_is_exported(module: ModuleType) -> None:
    assert [name for name in module.__all__ if name.startswith("_")] == []


def test_star_import_matches_all() -> None:
    namespace: dict[str, object] = {}
    exec("from presa_trio import *", namespace)
    namespace.pop("__builtins__")
    assert sorted(namespace) == sorted(presa_trio.__all__)


def test_key_names_are_exported() -> None:
    for name in ("Server", "Context", "McpError", "ToolError", "HostPolicy", "PROTOCOL_VERSION"):
        assert name in presa_trio.__all__
    assert presa_trio.PROTOCOL_VERSION == "2026-07-28"
    assert presa_trio.McpError is errors.McpError
    assert presa_trio.ToolError is errors.ToolError
