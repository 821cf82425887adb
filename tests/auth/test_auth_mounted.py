"""Authorization discovery when the MCP app is mounted under ``/api`` of a host app, followed by
a real client: the authorization guide's deployer (docs/guides/auth.md) mounted in Starlette
(its ``metadata_app()`` routed at the host's root) and in Quart-Trio (``mounted``), each
served by hypercorn on 127.0.0.1, and the official ``mcp`` SDK's ``OAuthClientProvider``
against a small authorization server served beside them (``oauth_server.py``): from the 401
through both metadata documents, registration and the code grant to a token the server
accepts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.live_http import mcp_request
from support.servers import ROOT, Served, free_port, run_client, running

pytestmark = pytest.mark.e2e

CLIENT = ROOT / "tests" / "support" / "oauth_sdk_client.py"
WELL_KNOWN = "/.well-known/oauth-protected-resource"

QUART_TRIO_HOST = """
from quart_trio import QuartTrio

auth = BearerAuth(
    verifier,
    resource="https://mcp.example.com/api/mcp",
    authorization_servers=[ISSUER],
    scopes_supported=["deploy"],
)
mcp_app = server.asgi_app(auth=auth)
app = QuartTrio(__name__)
app.asgi_app = mcp_app.mounted(app.asgi_app, at="/api")


@app.get("/")
async def home() -> str:
    return "the host app"
"""


def readme_block(name: str) -> str:
    text = (ROOT / "docs" / "guides" / "auth.md").read_text()
    found = re.search(rf"<!-- {name} -->\n```python\n(.*?)```\n<!-- /{name} -->", text, re.S)
    assert found is not None, f"docs/guides/auth.md lost its {name}"
    return found.group(1)


@pytest.fixture(scope="module")
def authorization_server() -> Iterator[Served]:
    port = free_port()
    env = {"PRESA_AS_PORT": str(port)}
    with running("oauth_server:app", ROOT / "tests" / "support", env=env, port=port) as served:
        yield served


def host_app(kind: str, issuer: str, base: str) -> str:
    """The guide's deployer (its issuer and host replaced by the live ones) mounted at /api."""
    mounting = readme_block("mounted-authorization-example") if kind == "starlette" else ""
    source = "\n".join([readme_block("authorization-example"), mounting or QUART_TRIO_HOST])
    return source.replace("https://auth.example.com", issuer).replace(
        "https://mcp.example.com", base
    )


def as_log(served: Served, since: int) -> list[dict[str, Any]]:
    lines = served.log()[since:].splitlines()
    return [json.loads(line[3:]) for line in lines if line.startswith("AS {")]


@pytest.mark.parametrize("kind", ["starlette", "quart-trio"])
def test_a_real_client_follows_the_challenge_of_a_mounted_app(
    kind: str, authorization_server: Served, tmp_path: Path
) -> None:
    issuer = f"http://127.0.0.1:{authorization_server.port}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    (tmp_path / "host_app.py").write_text(host_app(kind, issuer, base))
    with running("host_app:app", tmp_path, tmp_path / "server.log", port=port) as served:
        endpoint = f"{base}/api/mcp"
        metadata_url = f"{base}{WELL_KNOWN}/api/mcp"

        # The challenge names the metadata at the host's root, and it answers there.
        body, headers = mcp_request("tools/call", {"name": "status", "arguments": {}})
        refused = httpx.post(endpoint, content=body, headers=dict(headers))
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
        document = httpx.get(metadata_url)
        assert (document.status_code, document.headers["content-type"]) == (
            200,
            "application/json",
        )
        assert document.json() == {
            "resource": endpoint,
            "authorization_servers": [issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["deploy"],
        }
        assert httpx.post(metadata_url).status_code == 405
        if kind == "quart-trio":  # everything else still goes to the host
            assert httpx.get(f"{base}/").text == "the host app"

        # The official SDK's OAuth client goes from that 401 to a token, and calls with it.
        since = len(authorization_server.log())
        seen = run_client(CLIENT, endpoint)
        assert served.stop() == 0
    assert seen["status"] == [{"type": "text", "text": "api: up"}]
    assert seen["deploy"] == [{"type": "text", "text": "api deployed by ada"}]
    requests = [(verb, url.split("?")[0], *rest) for verb, url, *rest in seen["requests"]]
    assert requests == [
        ("POST", endpoint, "server/discover", 401),
        ("GET", metadata_url, None, 200),  # the challenge's URL, at the host's root
        ("GET", f"{issuer}/.well-known/oauth-authorization-server", None, 200),
        ("POST", f"{issuer}/register", None, 201),
        ("GET", f"{issuer}/authorize", None, 302),  # the "browser" (see oauth_sdk_client.py)
        ("POST", f"{issuer}/token", None, 200),
        ("POST", endpoint, "server/discover", 200),  # the refused request again, with the token
        ("POST", endpoint, "tools/call", 200),
        ("POST", endpoint, "tools/list", 200),  # the SDK reads the tools' output schemas
        ("POST", endpoint, "tools/call", 200),
    ]
    assert [
        (line["method"], line["path"], line["status"], line.get("resource"))
        for line in as_log(authorization_server, since)
    ] == [
        ("GET", "/.well-known/oauth-authorization-server", 200, None),
        ("POST", "/register", 201, None),
        ("GET", "/authorize", 302, endpoint),
        ("POST", "/token", 200, endpoint),
        ("GET", "/.well-known/jwks.json", 200, None),  # the server's JwtVerifier
    ]
    assert "Traceback" not in served.log()
