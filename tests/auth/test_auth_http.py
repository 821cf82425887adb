"""Bearer authentication at the HTTP edge (spec 2026-07-28 basic/authorization): the 401,
400 and 403 answers with their exact challenges and bodies, the Protected Resource Metadata
document at its well-known paths (mounted, and with CORS), and a verifier that fails.

Raw ASGI exchanges, no sockets; the verifier is a table of tokens.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import trio
from support.asgi_scope import headers as mcp_headers
from support.asgi_scope import http_scope

from presa_trio import Context, HostPolicy, Server
from presa_trio.auth import AccessToken, BearerAuth
from presa_trio.testing import Client

RESOURCE = "https://mcp.example.com/mcp"
METADATA_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
CHALLENGE = f'Bearer resource_metadata="{METADATA_URL}"'
INVALID = f'Bearer error="invalid_token", resource_metadata="{METADATA_URL}"'
DOCUMENT = {
    "resource": RESOURCE,
    "authorization_servers": ["https://auth.example.com"],
    "bearer_methods_supported": ["header"],
    "scopes_supported": ["read", "deploy"],
}
APP_ORIGIN = "https://app.example.com"
ALICE = AccessToken(subject="alice", client_id="cli", scopes=frozenset({"read"}))


class Table:
    def __init__(self, tokens: dict[str, AccessToken]) -> None:
        self.tokens = tokens

    async def verify(self, token: str) -> AccessToken | None:
        await trio.lowlevel.checkpoint()
        return self.tokens.get(token)


class Broken:
    async def verify(self, token: str) -> AccessToken | None:
        await trio.lowlevel.checkpoint()
        raise ConnectionError("introspection at 10.0.0.7 refused")


def bearer(verifier: Any = None, **options: Any) -> BearerAuth:
    return BearerAuth(
        verifier or Table({"alice": ALICE}),
        resource=RESOURCE,
        authorization_servers=["https://auth.example.com"],
        scopes_supported=["read", "deploy"],
        **options,
    )


def build(auth: BearerAuth | None = None, **app_options: Any) -> Any:
    server = Server("guarded", "1", auth=auth or bearer())

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Who is asking, as the server sees it."""
        token = ctx.access_token
        assert token is not None
        return f"{ctx.principal} via {token.client_id}"

    return server.asgi_app(**app_options)


class Raw:
    """One raw exchange; it fails the test if the app reads a body it should not."""

    def __init__(self, body: bytes = b"", readable: bool = True) -> None:
        self.body = body
        self.readable = readable
        self.read = False
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        assert self.readable, "the app read the body of a request it should have refused"
        if not self.read:
            self.read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(self, message: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        self.sent.append(message)

    @property
    def status(self) -> int:
        status: int = self.sent[0]["status"]
        return status

    @property
    def headers(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.sent[0]["headers"]}

    @property
    def payload(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent[1:]))


async def raw(
    app: Any,
    headers: list[tuple[str, str]],
    body: bytes = b"",
    *,
    readable: bool = True,
    query: bytes = b"",
    **scope: Any,
) -> Raw:
    exchange = Raw(body, readable)
    encoded = [(k.encode(), v.encode()) for k, v in [("host", "localhost:8000"), *headers]]
    found = http_scope(encoded, **scope)
    found["query_string"] = query
    await app(found, exchange.receive, exchange.send)
    return exchange


def error_body(code: int, message: str, **rest: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", **rest, "error": {"code": code, "message": message}}


async def test_a_request_without_a_token_is_401_and_its_body_is_never_read() -> None:
    app = build()
    async with app.lifespan():
        answer = await raw(app, mcp_headers(), readable=False)
    assert answer.status == 401
    body = error_body(-32600, "Unauthorized: a bearer token is required")
    assert answer.payload == body
    assert answer.headers == {
        "content-type": "application/json",
        "content-length": str(len(json.dumps(body, separators=(",", ":")))),
        "www-authenticate": CHALLENGE,
    }


async def test_a_token_in_the_query_string_is_not_a_token() -> None:
    app = build()
    async with app.lifespan():
        answer = await raw(app, mcp_headers(), readable=False, query=b"access_token=alice")
    assert (answer.status, answer.headers["www-authenticate"]) == (401, CHALLENGE)


async def test_a_notification_needs_a_token_too() -> None:
    app = build()
    async with app.lifespan():
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled"}).encode()
        answer = await raw(app, mcp_headers(), note, readable=False)
        assert answer.status == 401
        answer = await raw(app, [*mcp_headers(), ("authorization", "Bearer alice")], note)
        assert answer.status == 202


@pytest.mark.parametrize(
    ("authorization", "status", "challenge", "message"),
    [
        ("Bearer nobody", 401, INVALID, "Unauthorized: the access token is not valid here"),
        ("Basic YWxpY2U6cHc=", 401, CHALLENGE, "Unauthorized: a bearer token is required"),
        (
            "Bearer two words",
            400,
            f'Bearer error="invalid_request", resource_metadata="{METADATA_URL}"',
            "Bad request: the Bearer credential is not a token",
        ),
    ],
)
async def test_refused_tokens(
    authorization: str, status: int, challenge: str, message: str
) -> None:
    app = build()
    async with app.lifespan():
        headers = [*mcp_headers(), ("authorization", authorization)]
        answer = await raw(app, headers, readable=False)
    assert (answer.status, answer.headers["www-authenticate"]) == (status, challenge)
    assert answer.payload == error_body(-32600, message)


async def test_a_valid_token_reaches_the_handler_as_its_principal() -> None:
    app = build()
    async with app.lifespan():
        client = Client(app, token="alice")
        result = await client.call_tool("whoami")
    assert result["content"] == [{"type": "text", "text": "alice via cli"}]
    assert "www-authenticate" not in client.last.headers


async def test_required_scopes_are_checked_before_the_body_is_read() -> None:
    app = build(bearer(required_scopes=["mcp:use"]))
    async with app.lifespan():
        headers = [*mcp_headers(), ("authorization", "Bearer alice")]
        answer = await raw(app, headers, readable=False)
    assert answer.status == 403
    assert answer.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="mcp:use", resource_metadata="{METADATA_URL}"'
    )
    assert answer.payload == {
        "jsonrpc": "2.0",
        "error": {
            "code": -32600,
            "message": "Forbidden: insufficient scope (this operation needs: mcp:use)",
            "data": {"requiredScopes": ["mcp:use"]},
        },
    }


async def test_a_failing_verifier_is_a_500_that_tells_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = build(bearer(Broken()))
    async with app.lifespan():
        headers = [*mcp_headers(), ("authorization", "Bearer alice")]
        answer = await raw(app, headers, readable=False)
    assert answer.status == 500
    assert "www-authenticate" not in answer.headers
    assert answer.payload == error_body(-32603, "Internal error")
    assert "10.0.0.7" in caplog.text  # the detail is in the server's log, and only there


# ---------------------------------------------------------------------- metadata (RFC 9728)


@pytest.mark.parametrize(
    ("path", "root_path"),
    [
        ("/.well-known/oauth-protected-resource/mcp", ""),
        ("/.well-known/oauth-protected-resource", ""),
        ("/deploy/.well-known/oauth-protected-resource/mcp", "/deploy"),
        ("/deploy/.well-known/oauth-protected-resource", "/deploy"),
    ],
)
async def test_the_metadata_document_needs_no_token(path: str, root_path: str) -> None:
    app = build()
    async with app.lifespan():
        answer = await raw(app, [], method="GET", path=path, root_path=root_path)
    assert answer.status == 200
    assert answer.payload == DOCUMENT
    body = json.dumps(DOCUMENT, separators=(",", ":")).encode()
    assert answer.sent[1]["body"] == body
    assert answer.headers == {"content-type": "application/json", "content-length": str(len(body))}


async def test_the_resource_path_serves_the_document_when_mounted_elsewhere() -> None:
    auth = BearerAuth(
        Table({}),
        resource="https://h.example.com/tenants/a/mcp",
        authorization_servers=["https://auth.example.com"],
    )
    app = build(auth)
    async with app.lifespan():
        path = "/.well-known/oauth-protected-resource/tenants/a/mcp"
        answer = await raw(app, [], method="GET", path=path)
        assert answer.payload["resource"] == "https://h.example.com/tenants/a/mcp"
        missing = await raw(app, [], method="GET", path="/.well-known/oauth-protected-resource/x")
        assert missing.status == 404


async def test_the_metadata_document_is_only_for_get() -> None:
    app = build()
    async with app.lifespan():
        path = "/.well-known/oauth-protected-resource/mcp"
        answer = await raw(app, [], readable=False, method="POST", path=path)
    assert answer.status == 405
    assert answer.headers["allow"] == "GET"


async def test_without_auth_there_is_no_metadata_document() -> None:
    app = Server("open").asgi_app()
    async with app.lifespan():
        path = "/.well-known/oauth-protected-resource"
        answer = await raw(app, [], readable=False, method="GET", path=path)
    assert answer.status == 404


async def test_host_admission_guards_the_metadata_document_too() -> None:
    app = build()
    async with app.lifespan():
        headers = [("host", "evil.example.com")]
        path = "/.well-known/oauth-protected-resource"
        found = http_scope([(k.encode(), v.encode()) for k, v in headers], method="GET", path=path)
        exchange = Raw(readable=False)
        await app(found, exchange.receive, exchange.send)
    assert exchange.status == 403


async def test_cors_exposes_the_challenge_and_serves_the_document_to_browsers() -> None:
    policy = HostPolicy(allowed_origins=frozenset({APP_ORIGIN}))
    app = build(cors=True, host_policy=policy)
    origin = ("origin", APP_ORIGIN)
    async with app.lifespan():
        refused = await raw(app, [*mcp_headers(), origin], readable=False)
        path = "/.well-known/oauth-protected-resource/mcp"
        document = await raw(app, [origin], method="GET", path=path)
        preflight = [origin, ("access-control-request-method", "GET")]
        answered = await raw(app, preflight, readable=False, method="OPTIONS", path=path)
    assert refused.status == 401
    assert refused.headers["access-control-allow-origin"] == APP_ORIGIN
    assert refused.headers["access-control-expose-headers"] == "mcp-session-id, www-authenticate"
    assert document.status == 200
    assert document.headers["access-control-allow-origin"] == APP_ORIGIN
    assert answered.status == 204
    assert answered.headers["access-control-allow-methods"] == "GET"
    assert answered.headers["access-control-allow-origin"] == APP_ORIGIN


# ------------------------------------------------- metadata at the root of a host that mounts us

MOUNTED_RESOURCE = "https://mcp.example.com/api/mcp"
ROOT_PATH = "/.well-known/oauth-protected-resource/api/mcp"


def mounted_app(**app_options: Any) -> Any:
    auth = BearerAuth(
        Table({}), resource=MOUNTED_RESOURCE, authorization_servers=["https://auth.example.com"]
    )
    return build(auth, **app_options)


def starlette_host(mcp_app: Any) -> Any:
    from starlette.applications import Starlette
    from starlette.routing import Mount, Route

    metadata = mcp_app.metadata_app()
    assert metadata.path == ROOT_PATH
    return Starlette(routes=[Mount("/api", app=mcp_app), Route(metadata.path, metadata)])


async def test_a_starlette_host_serves_the_metadata_where_the_challenge_points() -> None:
    policy = HostPolicy(allowed_origins=frozenset({APP_ORIGIN}))
    mcp_app = mounted_app(cors=True, host_policy=policy)
    host = starlette_host(mcp_app)
    origin = ("origin", APP_ORIGIN)
    async with mcp_app.lifespan():
        refused = await raw(host, mcp_headers(), readable=False, path="/api/mcp")
        at_root = await raw(host, [origin], method="GET", path=ROOT_PATH)
        # What the MCP app answers at a metadata path of its own, below the mount.
        below = await raw(host, [origin], method="GET", path="/api" + ROOT_PATH)
        preflight = [origin, ("access-control-request-method", "GET")]
        options = await raw(host, preflight, readable=False, method="OPTIONS", path=ROOT_PATH)
        posted = await raw(host, [], readable=False, method="POST", path=ROOT_PATH)
        foreign = Raw(readable=False)
        scope = http_scope([(b"host", b"evil.example.com")], method="GET", path=ROOT_PATH)
        await host(scope, foreign.receive, foreign.send)
    metadata_url = f"https://mcp.example.com{ROOT_PATH}"
    assert refused.status == 401
    assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
    assert (at_root.status, at_root.sent, at_root.payload["resource"]) == (
        200,
        below.sent,
        MOUNTED_RESOURCE,
    )
    assert at_root.headers["access-control-allow-origin"] == APP_ORIGIN
    assert (options.status, options.headers["access-control-allow-methods"]) == (204, "GET")
    assert (posted.status, posted.headers["allow"]) == (405, "GET")
    assert foreign.status == 403


async def test_the_metadata_app_answers_its_own_path_only() -> None:
    mcp_app = mounted_app()
    metadata = mcp_app.metadata_app()
    async with mcp_app.lifespan():
        other = await raw(metadata, [], readable=False, method="GET", path=ROOT_PATH + "/x")
        stripped = await raw(metadata, [], method="GET", path="", root_path=ROOT_PATH)
        with trio.fail_after(5):  # a lifespan or websocket scope is not its business
            await metadata({"type": "websocket", "path": ROOT_PATH}, Raw().receive, Raw().send)
    assert (other.status, other.sent[1]["body"]) == (404, b"Not Found")
    assert stripped.status == 200  # a router that strips the path it matched
    with pytest.raises(RuntimeError, match="auth"):
        Server("open").asgi_app().metadata_app()


async def test_mounted_serves_the_metadata_at_the_hosts_root_itself() -> None:
    seen: list[str] = []

    async def host(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    mcp_app = mounted_app()
    app = mcp_app.mounted(host, at="/api")
    async with mcp_app.lifespan():
        refused = await raw(app, mcp_headers(), readable=False, path="/api/mcp")
        document = await raw(app, [], method="GET", path=ROOT_PATH)
        other = await raw(app, [], method="GET", path="/.well-known/oauth-protected-resource")
        below_a_root = await raw(app, [], method="GET", path="/x" + ROOT_PATH, root_path="/x")
    assert refused.headers["www-authenticate"] == (
        f'Bearer resource_metadata="https://mcp.example.com{ROOT_PATH}"'
    )
    assert (document.status, document.payload["resource"]) == (200, MOUNTED_RESOURCE)
    assert below_a_root.status == 200
    assert other.status == 204  # not this resource's path: the host's business
    assert seen == ["/.well-known/oauth-protected-resource"]
    assert Server("open").asgi_app().mounted(host, at="/api").metadata_path is None


async def test_a_listen_stream_ends_when_its_token_expires() -> None:
    """A stream must not outlive the authorization it was opened with: at the token's
    expiry it ends with its graceful result, and the client listens on with a new token."""
    brief = AccessToken(subject="alice", client_id="cli", expires_at=time.time() + 0.3)
    lasting = AccessToken(subject="alice", client_id="cli", expires_at=time.time() + 3600)
    app = build(bearer(Table({"brief": brief, "lasting": lasting})))
    async with app.lifespan():
        for token, ends in (("brief", True), ("lasting", False)):
            client = Client(app, token=token)
            async with client.listen({"toolsListChanged": True}) as stream:
                ack = await stream.next()
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                with trio.move_on_after(2) as waited:
                    final = await stream.next()
                assert waited.cancelled_caught is not ends
                if ends:
                    assert final["result"]["resultType"] == "complete"
                    assert (
                        final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
                        == (final["id"])
                    )
