"""Authorization end to end: a real hypercorn trio worker on 127.0.0.1, a JWT signed by a
key made for the test, httpx as the client, and the discovery a client goes through (401,
its ``resource_metadata``, the document), then scopes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from joserfc import jwk, jwt
from support.live_http import mcp_request
from support.servers import ROOT, free_port, running

pytestmark = pytest.mark.e2e

ISSUER = "https://auth.example.com"
KEY = jwk.ECKey.generate_key("P-256", auto_kid=True)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    chosen = free_port()
    env = {
        "PRESA_AUTH_PORT": str(chosen),
        "PRESA_AUTH_JWKS": json.dumps(jwk.KeySet([KEY]).as_dict(private=False)),
    }
    with running("auth_app:app", ROOT / "tests" / "support", env=env, port=chosen):
        yield chosen


def token(port: int, **changes: Any) -> str:
    claims = {
        "iss": ISSUER,
        "sub": "alice",
        "aud": f"http://127.0.0.1:{port}/mcp",
        "exp": int(time.time()) + 300,
        "scope": "read",
        **changes,
    }
    return jwt.encode({"alg": "ES256", "kid": KEY.kid}, claims, KEY, algorithms=["ES256"])


async def post(client: httpx.AsyncClient, name: str, bearer: str | None = None) -> httpx.Response:
    body, headers = mcp_request("tools/call", {"name": name, "arguments": {}})
    if bearer is not None:
        headers.append(("authorization", f"Bearer {bearer}"))
    return await client.post("/mcp", content=body, headers=headers)


async def test_discovery_then_tokens_then_scopes(port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    metadata_url = f"{base}/.well-known/oauth-protected-resource/mcp"
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        refused = await post(client, "whoami")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
        assert refused.json() == {
            "jsonrpc": "2.0",
            "error": {"code": -32600, "message": "Unauthorized: a bearer token is required"},
        }

        document = await client.get(metadata_url)
        assert document.status_code == 200
        assert document.json() == {
            "resource": f"{base}/mcp",
            "authorization_servers": [ISSUER],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["read", "deploy"],
        }

        answered = await post(client, "whoami", token(port))
        assert answered.status_code == 200, answered.text
        assert answered.json()["result"]["content"] == [{"type": "text", "text": "alice"}]

        forbidden = await post(client, "deploy", token(port))
        assert forbidden.status_code == 403
        assert forbidden.headers["www-authenticate"] == (
            f'Bearer error="insufficient_scope", scope="deploy", resource_metadata="{metadata_url}"'
        )
        assert forbidden.json()["id"] == 1
        assert forbidden.json()["error"]["data"] == {"requiredScopes": ["deploy"]}

        deployed = await post(client, "deploy", token(port, scope="read deploy"))
        assert deployed.status_code == 200, deployed.text
        assert deployed.json()["result"]["content"] == [
            {"type": "text", "text": "deployed by alice"}
        ]

        invalid = f'Bearer error="invalid_token", resource_metadata="{metadata_url}"'
        for bad in (
            token(port, aud="http://127.0.0.1:1/mcp"),  # issued for another server
            token(port, exp=int(time.time()) - 120),
            token(port, iss="https://evil.example.com"),
            token(port)[:-4] + "AAAA",
        ):
            answer = await post(client, "whoami", bad)
            assert (answer.status_code, answer.headers["www-authenticate"]) == (401, invalid)
