"""Unit tests for presa_trio.auth._metadata: resource identifiers, where their Protected
Resource Metadata lives (RFC 9728 §3.1), and the document."""

from __future__ import annotations

import pytest

from presa_trio.auth._metadata import (
    WELL_KNOWN,
    canonical,
    check_servers,
    check_url,
    document,
    metadata_path,
    metadata_paths,
    metadata_url,
)


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.example.com/mcp",
        "https://mcp.example.com",
        "https://mcp.example.com:8443",
        "https://mcp.example.com/server/mcp",
        "http://127.0.0.1:8000/mcp",
        "http://localhost/mcp",
        "http://[::1]:9/mcp",
    ],
)
def test_good_resource_identifiers(url: str) -> None:
    assert check_url(url, "resource") == url


@pytest.mark.parametrize(
    "url",
    [
        "mcp.example.com",
        "/mcp",
        "ftp://mcp.example.com/mcp",
        "http://mcp.example.com/mcp",  # plain http only on loopback
        "https://mcp.example.com#fragment",
        "https://mcp.example.com/mcp?tenant=1",
        "https://user@mcp.example.com/mcp",
        "https://mcp.example.com:99999/mcp",
        'https://mcp.example.com/"mcp"',
        "https://",
    ],
)
def test_bad_resource_identifiers(url: str) -> None:
    with pytest.raises(ValueError):
        check_url(url, "resource")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("https://MCP.Example.com/mcp", "https://mcp.example.com/mcp"),
        ("HTTPS://mcp.example.com/mcp/", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/", "https://mcp.example.com"),
        ("http://[::1]:80/mcp", "http://[::1]/mcp"),
    ],
)
def test_canonical_forms_agree(a: str, b: str) -> None:
    assert canonical(a) == canonical(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/MCP"),
        ("https://mcp.example.com/mcp", "http://mcp.example.com/mcp"),
        ("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp/other"),
        ("https://mcp.example.com.evil/mcp", "https://mcp.example.com/mcp"),
    ],
)
def test_canonical_forms_differ(a: str, b: str) -> None:
    assert canonical(a) != canonical(b)


@pytest.mark.parametrize(
    ("resource", "url"),
    [
        ("https://h/mcp", "https://h/.well-known/oauth-protected-resource/mcp"),
        ("https://h/public/mcp", "https://h/.well-known/oauth-protected-resource/public/mcp"),
        ("https://h", "https://h/.well-known/oauth-protected-resource"),
        ("https://h/", "https://h/.well-known/oauth-protected-resource"),
        ("https://h:8443/mcp", "https://h:8443/.well-known/oauth-protected-resource/mcp"),
    ],
)
def test_the_metadata_url_inserts_the_well_known_suffix(resource: str, url: str) -> None:
    assert metadata_url(resource) == url


def test_the_metadata_path_is_at_the_hosts_root_with_the_resources_path_after_it() -> None:
    assert metadata_path("https://h/api/mcp") == WELL_KNOWN + "/api/mcp"
    assert metadata_path("https://h:8443/api/mcp/") == WELL_KNOWN + "/api/mcp/"
    assert metadata_path("https://h") == WELL_KNOWN


def test_the_paths_that_serve_the_document() -> None:
    assert metadata_paths("https://h/deploy/mcp", "/mcp") == {
        WELL_KNOWN + "/deploy/mcp",
        WELL_KNOWN + "/mcp",
        WELL_KNOWN,
    }
    assert metadata_paths("https://h", "/mcp") == {WELL_KNOWN + "/mcp", WELL_KNOWN}


def test_the_document() -> None:
    assert document("https://h/mcp", ["https://as.example.com"]) == {
        "resource": "https://h/mcp",
        "authorization_servers": ["https://as.example.com"],
        "bearer_methods_supported": ["header"],
    }
    assert document(
        "https://h/mcp",
        ("https://a", "https://b"),
        scopes_supported=("read",),
        resource_name="Deployer",
        resource_documentation="https://h/docs",
    ) == {
        "resource": "https://h/mcp",
        "authorization_servers": ["https://a", "https://b"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["read"],
        "resource_name": "Deployer",
        "resource_documentation": "https://h/docs",
    }


def test_authorization_servers() -> None:
    assert check_servers(["https://as.example.com/tenant1"]) == ("https://as.example.com/tenant1",)
    for bad in ([], "https://as.example.com", ["http://as.example.com"], ["as.example.com"]):
        with pytest.raises(ValueError):
            check_servers(bad)
