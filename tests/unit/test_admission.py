"""Unit tests for presa_trio._wire.admission: the DNS-rebinding Host/Origin check."""

from __future__ import annotations

import pytest

from presa_trio._wire.admission import LOOPBACK_HOSTS, HostPolicy, refuse_reason

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
