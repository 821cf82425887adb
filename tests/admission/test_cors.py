"""Opt-in CORS (``asgi_app(cors=True)``) for browser clients: the preflight is answered, and
every answer to an allowed origin names it; the allow-list is Host/Origin admission's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.asgi_scope import exchange

from presa_trio import Cors, HostPolicy, Server
from presa_trio.testing import Client

APP_ORIGIN = "https://app.example.com"


def app_with(cors: bool, legacy: bool = True) -> Any:
    server = Server("browser", legacy=legacy)
    policy = HostPolicy(allowed_origins=frozenset({APP_ORIGIN}))
    return server.asgi_app(cors=cors, host_policy=policy)


PREFLIGHT = [
    ("host", "localhost:8000"),
    ("access-control-request-method", "POST"),
    (
        "access-control-request-headers",
        "content-type, mcp-protocol-version, mcp-method, mcp-param-region, x-tracking",
    ),
]


async def preflight(app: Any, origin: str) -> tuple[int, dict[bytes, bytes]]:
    return await exchange(app, [*PREFLIGHT, ("origin", origin)], method="OPTIONS")


async def test_a_preflight_from_an_allowed_origin_is_answered() -> None:
    app = app_with(cors=True)
    async with app.lifespan():
        status, headers = await preflight(app, APP_ORIGIN)
    assert status == 204
    assert headers[b"access-control-allow-origin"] == APP_ORIGIN.encode()
    assert headers[b"access-control-allow-methods"] == b"POST, GET, DELETE"
    assert headers[b"access-control-allow-headers"] == (
        b"content-type, mcp-protocol-version, mcp-method, mcp-param-region"
    )
    assert headers[b"vary"] == b"origin"
    assert headers[b"access-control-expose-headers"] == b"mcp-session-id"


async def test_a_modern_only_endpoint_allows_post_alone_and_exposes_no_session() -> None:
    app = app_with(cors=True, legacy=False)
    async with app.lifespan():
        status, headers = await preflight(app, APP_ORIGIN)
    assert status == 204
    assert headers[b"access-control-allow-methods"] == b"POST"
    assert b"access-control-expose-headers" not in headers


async def test_a_preflight_from_another_origin_is_refused() -> None:
    app = app_with(cors=True)
    async with app.lifespan():
        status, headers = await preflight(app, "https://evil.example.com")
    assert status == 403
    assert b"access-control-allow-origin" not in headers


async def test_answers_to_an_allowed_origin_name_it_and_cors_is_off_by_default() -> None:
    for cors in (True, False):
        app = app_with(cors=cors)
        async with app.lifespan():
            client = Client(app)
            message = client.message("server/discover")
            headers = [*client.headers_for(message), ("origin", APP_ORIGIN)]
            status, answered = await exchange(app, headers, json.dumps(message).encode())
            assert status == 200
            if cors:
                assert answered[b"access-control-allow-origin"] == APP_ORIGIN.encode()
            else:
                assert b"access-control-allow-origin" not in answered
            status, _ = await preflight(app, APP_ORIGIN)
            assert status == (204 if cors else 405)


def preflight_for(requested: str) -> list[tuple[str, str]]:
    return [
        ("host", "localhost:8000"),
        ("origin", APP_ORIGIN),
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", requested),
    ]


async def test_the_trace_headers_pass_a_preflight_by_default() -> None:
    app = app_with(cors=True)
    requested = "content-type, traceparent, tracestate, baggage, x-request-id"
    async with app.lifespan():
        status, headers = await exchange(app, preflight_for(requested), method="OPTIONS")
    assert status == 204
    assert headers[b"access-control-allow-headers"] == (
        b"content-type, traceparent, tracestate, baggage"
    )


async def test_the_allowed_headers_are_configurable() -> None:
    server = Server("browser")
    policy = HostPolicy(allowed_origins=frozenset({APP_ORIGIN}))
    app = server.asgi_app(cors=Cors(allow_headers=["X-Request-Id"]), host_policy=policy)
    requested = "mcp-method, traceparent, x-request-id, mcp-param-region"
    async with app.lifespan():
        status, headers = await exchange(app, preflight_for(requested), method="OPTIONS")
    assert status == 204
    # the MCP headers always pass; the trace headers only when allowed
    assert headers[b"access-control-allow-headers"] == (
        b"mcp-method, x-request-id, mcp-param-region"
    )


def test_cors_settings_refuse_what_is_not_a_header_name() -> None:
    with pytest.raises(TypeError):
        Cors(allow_headers="traceparent")
    with pytest.raises(ValueError):
        Cors(allow_headers=["trace parent"])
    assert Cors().allow_headers >= {"traceparent", "tracestate", "baggage", "mcp-method"}
