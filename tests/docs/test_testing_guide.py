"""The testing guide (docs/guides/testing.md), run as written: its test, beside the README's
Quickstart ``app.py``, in a project of its own, passes under pytest-trio with
``trio_mode = true`` under ``[tool.pytest.ini_options]``, and with ``@pytest.mark.trio`` on
it instead; with neither it does not run on trio (the control)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def block(page: str, starts: str) -> str:
    text = (ROOT / page).read_text()
    found = re.search(rf"```python\n({re.escape(starts)}.*?)```", text, re.S)
    assert found is not None, f"{page} lost its block starting {starts!r}"
    return found.group(1)


@pytest.mark.parametrize("how", ["trio_mode", "mark", "neither"])
def test_the_readme_test_runs_under_pytest_trio(how: str, tmp_path: Path) -> None:
    assert "trio_mode = true` under `[tool.pytest.ini_options]`, or with `@pytest.mark.trio`" in (
        " ".join((ROOT / "docs" / "guides" / "testing.md").read_text().split())
    )
    (tmp_path / "app.py").write_text(block("README.md", "# app.py\n"))
    test = block("docs/guides/testing.md", "# test_app.py\n")
    assert "from app import server\n" in test
    if how == "mark":
        marked = "@pytest.mark.trio\nasync def test_"
        test = "import pytest\n" + test.replace("async def test_", marked)
    (tmp_path / "test_app.py").write_text(test)
    options = "trio_mode = true\n" if how == "trio_mode" else ""
    (tmp_path / "pyproject.toml").write_text(f"[tool.pytest.ini_options]\n{options}")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if how == "neither":
        assert done.returncode == 1
        assert "async def functions are not natively supported" in done.stdout
    else:
        assert (done.returncode, done.stdout.splitlines()[-1].split(" in ")[0]) == (0, "1 passed")
