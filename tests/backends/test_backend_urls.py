"""Backend URLs: what parses, what is refused (in one clear line, naming what to install when a
driver is missing), and the check a server or ``presa-trio serve`` runs before it serves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from presa_trio import Server
from presa_trio.backends import BackendError, BackendUrl, check_url, parse_url


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("memory:", BackendUrl("memory", "", {})),
        ("memory://", BackendUrl("memory", "", {})),
        ("sqlite:///var/lib/presa/state.db", BackendUrl("sqlite", "/var/lib/presa/state.db", {})),
        (
            "sqlite:////tmp/s.db?lease=3&poll=0.02&timeout=1",
            BackendUrl("sqlite", "/tmp/s.db", {"lease": "3", "poll": "0.02", "timeout": "1"}),
        ),
    ],
)
def test_a_backend_url_parses(url: str, parsed: BackendUrl) -> None:
    assert parse_url(url) == parsed


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "redis://localhost/0",
            "unknown store 'redis': use memory:, sqlite:///ABSOLUTE/PATH.db or postgresql://USER@HOST:PORT/DB",
        ),
        (
            "nonsense",
            "unknown store 'nonsense': use memory:, sqlite:///ABSOLUTE/PATH.db or postgresql://USER@HOST:PORT/DB",
        ),
        (
            "sqlite://host/x.db",
            "a sqlite store URL has no host: sqlite:///ABSOLUTE/PATH.db, got 'sqlite://host/x.db'",
        ),
        ("sqlite:state.db", "a sqlite store needs an absolute file path, got 'sqlite:state.db'"),
        ("sqlite:///tmp/", "a sqlite store needs an absolute file path, got 'sqlite:///tmp/'"),
        (
            "sqlite:///tmp/s.db?leese=3",
            "unknown sqlite store options ['leese']: known are lease, poll, timeout",
        ),
    ],
)
def test_a_bad_backend_url_is_one_clear_line(url: str, message: str) -> None:
    with pytest.raises(BackendError) as refused:
        parse_url(url)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("value", "message"),
    [("soon", "store option lease='soon' is not a number"), ("0", "must be positive")],
)
def test_a_bad_option_value_is_refused(value: str, message: str) -> None:
    with pytest.raises(BackendError, match=message):
        parse_url(f"sqlite:///tmp/s.db?lease={value}").number("lease", 20.0)
    assert parse_url("sqlite:///tmp/s.db").number("lease", 20.0) == 20.0


def test_a_server_refuses_a_bad_backend_when_declared() -> None:
    with pytest.raises(BackendError, match="unknown store 'mysql'"):
        Server("x", backend="mysql://db/x")
    with pytest.raises(BackendError, match="unknown store 'mysql'"):
        Server("x").asgi_app(backend="mysql://db/x")


def test_check_url_opens_the_file_or_says_why_not(tmp_path: Path) -> None:
    check_url(f"sqlite:///{tmp_path}/ok.db")
    assert (tmp_path / "ok.db").is_file()
    check_url("memory:")
    with pytest.raises(BackendError) as missing:
        check_url(f"sqlite:///{tmp_path}/no/such/dir/x.db")
    assert str(missing.value) == (
        f"cannot use the sqlite store {tmp_path}/no/such/dir/x.db: no directory "
        f"{tmp_path}/no/such/dir"
    )
    (tmp_path / "a-directory.db").mkdir()
    with pytest.raises(BackendError, match=r"^cannot use the sqlite store .*a-directory\.db: "):
        check_url(f"sqlite:///{tmp_path}/a-directory.db")
    (tmp_path / "garbage.db").write_bytes(b"not a database, " * 100)
    with pytest.raises(BackendError, match="file is not a database"):
        check_url(f"sqlite:///{tmp_path}/garbage.db")


def test_without_psycopg_a_postgresql_url_says_what_to_install() -> None:
    program = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from presa_trio.backends import BackendError, check_url\n"
        "try:\n"
        "    check_url('postgresql://presa@/presa')\n"
        "except BackendError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == (
        "the postgresql store needs psycopg: pip install 'presa_trio[postgres]'\n"
    )
