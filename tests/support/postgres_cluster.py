"""A throwaway PostgreSQL cluster for the tests: Debian's PostgreSQL 15 binaries, ``initdb``
and ``pg_ctl`` run as an unprivileged user (``postgres`` when the tests run as root) in a
temporary directory, listening on a Unix socket only (no TCP at all), stopped at the end.
No mock stands in for the database."""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

PORT = 5432  # names the socket file only: the cluster listens on no TCP address


def binaries() -> Path:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not versions:
        raise RuntimeError(
            "PostgreSQL is not installed (pg_ctl not found): install Debian's postgresql-15 "
            "package (.ci/run does, with apt-get)"
        )
    return Path(versions[-1]).parent


class Cluster:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.data = base / "data"
        self.bin = binaries()
        root = os.geteuid() == 0
        self._as = ["runuser", "-u", "postgres", "--"] if root else []
        if root:
            shutil.chown(base, "postgres", "postgres")

    def _run(self, *command: str) -> None:
        subprocess.run(
            [*self._as, *command], check=True, capture_output=True, timeout=120, cwd=self.base
        )

    def init(self) -> None:
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "presa",
            "-E", "UTF8", "--no-sync",
        )  # fmt: skip

    def start(self) -> None:
        options = f"-c listen_addresses='' -k {self.base} -p {PORT} -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.base / "log"),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://presa@/{database}?host={self.base}&port={PORT}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        name = f"presa_{secrets.token_hex(6)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def log(self) -> str:
        path = self.base / "log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def running_cluster() -> Iterator[Cluster]:
    # a short path: a Unix socket's path must stay under about 100 bytes
    base = Path(tempfile.mkdtemp(prefix="presa-pg-", dir="/tmp"))
    cluster = Cluster(base)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        # not running, if a test stopped it or it never started
        with contextlib.suppress(subprocess.CalledProcessError):
            cluster.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)
