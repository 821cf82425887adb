"""Unit tests for the DNS-rebinding Host/Origin check (presa_trio._protocol.headers)."""

from __future__ import annotations

import pytest

from presa_trio._protocol.headers import LOOPBACK_HOSTS, HostPolicy, refuse_any, refuse_reason

DEFAULT = HostPolicy()


def test_default_policy() -> None:
    assert DEFAULT.allowed_hosts == LOOPBACK_HOSTS
    assert DEFAULT.allowed_origins == frozenset()
    assert DEFAULT.enabled is True


@pytest.mark.parametrize(
    "host",
    [
        None,
        "localhost",
        "localhost:8080",
        "LOCALHOST:80",
        "127.0.0.1",
        "127.0.0.1:3000",
        "[::1]",
        "[::1]:3000",
        "::1",
        " localhost ",
    ],
)
def test_default_admits_loopback_hosts(host: str | None) -> None:
    assert refuse_reason(DEFAULT, host, None) is None


@pytest.mark.parametrize(
    "host",
    [
        "evil.example.com",
        "evil.example.com:80",
        "localhost.evil.example.com",
        "127.0.0.1.nip.io",
        "127.0.0.2",
        "0.0.0.0",
        "[::2]:80",
        "[::1",
        "",
    ],
)
def test_default_refuses_other_hosts(host: str) -> None:
    assert isinstance(refuse_reason(DEFAULT, host, None), str)


@pytest.mark.parametrize(
    "origin",
    [
        None,
        "null",
        "http://127.0.0.1:8080",
        "http://localhost",
        "http://localhost:5173/",
        "https://localhost",
        "http://[::1]:3000",
        "HTTP://LOCALHOST",
    ],
)
def test_default_admits_loopback_origins(origin: str | None) -> None:
    assert refuse_reason(DEFAULT, "localhost:8000", origin) is None


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example.com",
        "https://evil.example.com:443",
        "http://localhost.evil.example.com",
        "http://localhost@evil.example.com",
        "http://127.0.0.2",
        "ftp://localhost",
        "file://localhost",
        "chrome-extension://abcdef",
        "ws://localhost",
        "localhost",
        "http://",
        "http://[::1",
        "",
    ],
)
def test_default_refuses_other_origins(origin: str) -> None:
    assert isinstance(refuse_reason(DEFAULT, "localhost", origin), str)


def test_bad_host_is_refused_whatever_the_origin() -> None:
    assert refuse_reason(DEFAULT, "evil.example.com", "http://localhost") is not None
    assert refuse_reason(DEFAULT, "evil.example.com", None) is not None


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("evil.example.com", "http://evil.example.com"),
        ("", "ftp://x"),
        ("anything", "garbage"),
        (None, "http://[::1"),
    ],
)
def test_disabled_admits_everything(host: str | None, origin: str | None) -> None:
    assert refuse_reason(HostPolicy(enabled=False), host, origin) is None


def test_allowed_origins_exact_match() -> None:
    policy = HostPolicy(allowed_origins=frozenset({"https://app.example.com"}))
    assert refuse_reason(policy, "localhost", "https://app.example.com") is None
    assert refuse_reason(policy, "localhost", "https://app.example.com/") is None
    assert refuse_reason(policy, "localhost", "http://localhost:3000") is None
    for origin in (
        "http://app.example.com",
        "https://app.example.com:8443",
        "https://app.example.com.evil.com",
        "https://evil.app.example.com",
    ):
        assert refuse_reason(policy, "localhost", origin) is not None, origin


def test_allowed_origins_with_a_non_http_scheme() -> None:
    policy = HostPolicy(allowed_origins=frozenset({"vscode-webview://abc"}))
    assert refuse_reason(policy, "localhost", "vscode-webview://abc") is None
    assert refuse_reason(policy, "localhost", "vscode-webview://abd") is not None


def test_public_deployment_hosts() -> None:
    policy = HostPolicy(allowed_hosts=frozenset({"mcp.example.com"}))
    assert refuse_reason(policy, "mcp.example.com", None) is None
    assert refuse_reason(policy, "MCP.example.com:443", "https://mcp.example.com") is None
    assert refuse_reason(policy, "localhost", None) is not None
    assert refuse_reason(policy, "mcp.example.com", "https://evil.example.com") is not None


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.com\\@localhost",
        "http://user@localhost",
        "http://localhost/path",
        "http://localhost?x",
        "http://localhost#x",
        "http://localhost:99999999",
        "http:/localhost",
        "http://",
    ],
)
def test_an_origin_that_is_not_scheme_host_port_is_refused(origin: str) -> None:
    assert refuse_reason(DEFAULT, "localhost", origin) == f"Origin {origin!r} is not allowed"


def test_every_value_of_a_repeated_host_or_origin_is_checked() -> None:
    assert refuse_any(DEFAULT, ["localhost", "127.0.0.1:8000"], ["http://[::1]:3000"]) is None
    assert refuse_any(DEFAULT, ["evil.com", "localhost"], []) == "Host 'evil.com' is not allowed"
    assert refuse_any(DEFAULT, ["localhost"], ["http://localhost", "http://evil.com"]) == (
        "Origin 'http://evil.com' is not allowed"
    )
    assert refuse_any(DEFAULT, [], []) is None


@pytest.mark.parametrize(
    "host", ["[::1]evil.com", "localhost:notaport", "localhost:", "local host"]
)
def test_a_host_that_is_not_name_and_port_is_refused(host: str) -> None:
    assert refuse_reason(DEFAULT, host, None) == f"Host {host!r} is not allowed"


def test_a_host_is_judged_the_same_every_time() -> None:
    """Host names are read once per distinct value (a cache): a refused one stays refused."""
    for _ in range(3):
        assert refuse_reason(DEFAULT, "evil.com:80", None) == "Host 'evil.com:80' is not allowed"
        assert refuse_reason(DEFAULT, "localhost:3000", None) is None
        assert refuse_reason(DEFAULT, "local host", None) == "Host 'local host' is not allowed"
