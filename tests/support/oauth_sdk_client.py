"""Follow a presa_trio server's 401 with the official MCP Python SDK's OAuth client, as an
application would: ``python oauth_sdk_client.py URL``.

``OAuthClientProvider`` discovers the protected resource metadata and the authorization
server, registers, and runs the authorization code grant with PKCE; the "browser" is a
plain HTTP GET of the authorization URL (the test's authorization server consents at once)
whose redirect hands the code back. Runs in its own interpreter (asyncio, away from the
test's trio loop) and prints one JSON object: every request the client made (with its
``Mcp-Method``, if any) and its status, and the tool results it got.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1:1/callback"  # never contacted: the code is read off the redirect


class Memory:
    """A ``TokenStorage`` that keeps everything in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def main(url: str) -> dict[str, Any]:
    requests: list[list[Any]] = []

    async def record(response: httpx2.Response) -> None:
        request = response.request
        method = request.headers.get("mcp-method")  # on requests to the MCP endpoint
        requests.append([request.method, str(request.url), method, response.status_code])

    redirected: dict[str, str] = {}

    async def redirect_handler(authorization_url: str) -> None:
        async with httpx2.AsyncClient(event_hooks={"response": [record]}, timeout=30) as browser:
            answer = await browser.get(authorization_url)
        query = parse_qs(urlsplit(answer.headers["location"]).query)
        redirected.update({key: values[0] for key, values in query.items()})

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(**redirected)

    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(client_name="presa e2e", redirect_uris=[REDIRECT_URI]),
        storage=Memory(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    hooks = {"response": [record]}
    async with (
        httpx2.AsyncClient(auth=provider, event_hooks=hooks, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        status = await client.call_tool("status", {"service": "api"})
        deploy = await client.call_tool("deploy", {"service": "api"})
    return {
        "requests": requests,
        "status": [block.model_dump(exclude_none=True) for block in status.content],
        "deploy": [block.model_dump(exclude_none=True) for block in deploy.content],
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
