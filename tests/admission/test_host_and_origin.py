"""DNS rebinding through the ASGI app (raw ASGI, so the bytes are the test's): loopback Host and
Origin values are admitted, every foreign one is refused, header names are read in any case, and
a configured ``HostPolicy`` admits exactly what it lists. (The pure check:
tests/unit/test_admission.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from support.raw_asgi import asgi, body_of, headers_of

from presa_trio import AsgiApp, HostPolicy, Server

ALLOWED_HOSTS = [
    "localhost",
    "localhost:8000",
    "LOCALHOST",
    "LocalHost:80",
    "127.0.0.1",
    "127.0.0.1:8000",
    "[::1]",
    "[::1]:80",
    "::1",
    None,  # no Host header at all (HTTP/1.0): nothing to rebind
]
REFUSED_HOSTS = [
    "evil.example",
    "evil.example:8000",
    "127.0.0.1.nip.io",
    "localhost.evil.com",
    "localhost.",  # a trailing dot is not normalised: refused
    "127.0.0.2",
    "0.0.0.0",
    "[::ffff:127.0.0.1]",
    "2130706433",
    "[::1",
    "localhost:8000:80",
    "",
]
ALLOWED_ORIGINS = [
    None,
    "null",
    "http://127.0.0.1:8000",
    "http://localhost",
    "https://LOCALHOST:3000",
    "http://[::1]:8000",
]
REFUSED_ORIGINS = [
    "http://evil.example",
    "https://localhost.evil.com",
    "http://127.0.0.1.nip.io:8000",
    "http://localhost.",
    "NULL",
    "file://",
    "file:///etc/passwd",
    "chrome-extension://abcdefgh",
    "ws://localhost",
    "http://",
    "http://[::1",
]


async def rebinding(app: AsgiApp, host: str | None, origin: str | None) -> Any:
    extra: dict[str, str] = {}
    if host is not None:
        extra["host"] = host
    if origin is not None:
        extra["origin"] = origin
    return await asgi(app, body_of("server/discover"), headers_of("server/discover", **extra))


@pytest.mark.parametrize("host", ALLOWED_HOSTS)
@pytest.mark.parametrize("origin", ALLOWED_ORIGINS)
async def test_loopback_hosts_and_origins_are_admitted(
    host: str | None, origin: str | None
) -> None:
    app = Server("rebind", "1").asgi_app()
    async with app.lifespan():
        start, body = await rebinding(app, host, origin)
    assert start["status"] == 200 and body["result"]["resultType"] == "complete"


@pytest.mark.parametrize("host", REFUSED_HOSTS)
async def test_foreign_hosts_are_refused(host: str) -> None:
    app = Server("rebind", "1").asgi_app()
    async with app.lifespan():
        start, body = await rebinding(app, host, "http://localhost")
    assert start["status"] == 403
    assert body == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": f"Forbidden: Host {host!r} is not allowed"},
    }


@pytest.mark.parametrize("host", ["localhost:8000", None])
@pytest.mark.parametrize("origin", REFUSED_ORIGINS)
async def test_foreign_origins_are_refused(host: str | None, origin: str) -> None:
    app = Server("rebind", "1").asgi_app()
    async with app.lifespan():
        start, body = await rebinding(app, host, origin)
    assert start["status"] == 403
    assert body == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": f"Forbidden: Origin {origin!r} is not allowed"},
    }


async def test_header_names_are_read_in_any_case() -> None:
    """ASGI servers give header names in lower case, but one that does not is read the same:
    its foreign Host is refused, and its routing headers route."""
    app = Server("rebind", "1").asgi_app()
    capitalized = [(name.title(), value) for name, value in headers_of("server/discover")]
    async with app.lifespan():
        foreign = await asgi(app, body_of("server/discover"), [*capitalized, (b"Host", b"x.io")])
        admitted = await asgi(app, body_of("server/discover"), capitalized)
        wrong = [*(h for h in capitalized if h[0] != b"Mcp-Method"), (b"MCP-Method", b"tools/list")]
        mismatched = await asgi(app, body_of("server/discover"), wrong)
    assert foreign[0]["status"] == 403
    refused = {"code": -32600, "message": "Forbidden: Host 'x.io' is not allowed"}
    assert foreign[1] == {"jsonrpc": "2.0", "error": refused}
    assert admitted[0]["status"] == 200 and admitted[1]["result"]["resultType"] == "complete"
    assert mismatched[0]["status"] == 400
    mismatch = "Mcp-Method header 'tools/list' does not match method 'server/discover'"
    assert mismatched[1] == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32020, "message": mismatch},
    }


async def test_a_configured_policy_admits_exactly_what_it_lists() -> None:
    policy = HostPolicy(
        allowed_hosts=frozenset({"mcp.example"}),
        allowed_origins=frozenset({"https://app.example"}),
    )
    app = Server("rebind", "1").asgi_app(host_policy=policy)
    async with app.lifespan():
        for host, origin, status in (
            ("mcp.example", "https://app.example", 200),
            ("MCP.example:443", "HTTPS://APP.EXAMPLE/", 200),  # case and a trailing slash
            ("mcp.example", "http://mcp.example", 200),  # same-host origin
            ("localhost", None, 403),  # the loopback default no longer applies
            ("mcp.example", "https://evil.example", 403),
            ("mcp.example", "https://app.example.evil.com", 403),
        ):
            start, _ = await rebinding(app, host, origin)
            assert start["status"] == status, (host, origin)
    open_app = Server("rebind", "1").asgi_app(host_policy=HostPolicy(enabled=False))
    async with open_app.lifespan():
        start, _ = await rebinding(open_app, "evil.example", "http://evil.example")
        assert start["status"] == 200
