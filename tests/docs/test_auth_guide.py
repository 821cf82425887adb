"""The authorization guide's example (docs/guides/auth.md), run as it is: its JwtVerifier
fetches the key set of a stand-in authorization server (in process, through httpx's ASGI
transport), and tokens signed here meet its 401, 403 and 200."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc import jwk, jwt

from presa_trio.testing import open_client

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "auth.md"
KEY = jwk.ECKey.generate_key("P-256", auto_kid=True)
REAL_CLIENT = httpx.AsyncClient


def example() -> str:
    text = GUIDE.read_text()
    pattern = (
        r"<!-- authorization-example -->\n```python\n(.*?)```\n<!-- /authorization-example -->"
    )
    found = re.search(pattern, text, re.S)
    assert found is not None, "docs/guides/auth.md lost its authorization example"
    return found.group(1)


async def jwks(scope: Any, receive: Any, send: Any) -> None:
    assert (scope["server"][0], scope["path"]) == ("auth.example.com", "/.well-known/jwks.json")
    body = json.dumps(jwk.KeySet([KEY]).as_dict(private=False)).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def token(scope: str) -> str:
    claims = {
        "iss": "https://auth.example.com",
        "sub": "ada",
        "aud": "https://mcp.example.com/mcp",
        "exp": int(time.time()) + 60,
        "scope": scope,
    }
    return jwt.encode({"alg": "ES256", "kid": KEY.kid}, claims, KEY, algorithms=["ES256"])


async def test_the_readme_authorization_example(monkeypatch: pytest.MonkeyPatch) -> None:
    def client(**options: Any) -> httpx.AsyncClient:
        return REAL_CLIENT(transport=httpx.ASGITransport(app=jwks), **options)

    monkeypatch.setattr(httpx, "AsyncClient", client)
    namespace: dict[str, Any] = {"__name__": "deployer"}
    exec(compile(example(), f"{GUIDE}:authorization-example", "exec"), namespace)

    async with open_client(namespace["app"]) as mcp:
        refused = await mcp.send(mcp.message("tools/call", {"name": "status"}))
        assert refused.status == 401
        metadata = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata}"'

        mcp.token = token("openid")
        answer = await mcp.call_tool("status", {"service": "api"})
        assert answer["content"] == [{"type": "text", "text": "api: up"}]
        call = mcp.message("tools/call", {"name": "deploy", "arguments": {"service": "api"}})
        assert (await mcp.send(call)).status == 403

        mcp.token = token("deploy")
        answer = await mcp.call_tool("deploy", {"service": "api"})
        assert answer["content"] == [{"type": "text", "text": "api deployed by ada"}]
