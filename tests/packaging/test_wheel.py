"""The built wheel carries the vendored schema, so an installed presa_trio needs no checkout."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.servers import ROOT

import presa_trio

pytestmark = pytest.mark.e2e


def test_wheel_ships_the_schema(tmp_path: Path) -> None:
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("presa_trio-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"presa_trio-{presa_trio.__version__}.dist-info/METADATA")
        schemas = {
            version: archive.read(f"presa_trio/schema/{version}/schema.json")
            for version in ("2026-07-28", "2025-11-25", "2025-06-18")
        }
        tasks = archive.read("presa_trio/schema/extensions/tasks/schema.json")
    # one version, pyproject's: the wheel's metadata and the installed package's agree
    assert f"\nVersion: {presa_trio.__version__}\n".encode() in metadata
    assert wheel.name.startswith(f"presa_trio-{presa_trio.__version__}-")
    assert "presa_trio/py.typed" in names
    assert "presa_trio/ext/tasks/_runner.py" in names
    readme = (ROOT / "schema" / "README.md").read_text()
    recorded = dict(re.findall(r"sha256 \(([0-9-]+)\): ([0-9a-f]{64})", readme))
    assert {v: hashlib.sha256(s).hexdigest() for v, s in schemas.items()} == recorded
    [tasks_digest] = re.findall(r"sha256 \(extension tasks\): ([0-9a-f]{64})", readme)
    assert hashlib.sha256(tasks).hexdigest() == tasks_digest


def test_the_version_is_pyprojects() -> None:
    import tomllib
    from importlib.metadata import version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert presa_trio.__version__ == version("presa_trio") == project["version"]
