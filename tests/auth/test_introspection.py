"""``IntrospectionVerifier``: opaque tokens checked at an RFC 7662 endpoint, a small ASGI app
served by hypercorn on 127.0.0.1, through a presa server with ``BearerAuth``. An active token
is its principal; an inactive one is 401 with the bearer challenge; an endpoint that is
closed, failing or slow is a retryable 503. Answers are cached (counted at the endpoint)
until the token's ``exp`` or ``cache_ttl``, bounded, and one token's concurrent checks share
one request."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

import pytest
import trio
import trio.testing
from hypercorn.config import Config
from hypercorn.trio import serve

from presa_trio import Context, Server
from presa_trio.auth import BearerAuth, IntrospectionVerifier
from presa_trio.errors import ServiceUnavailable
from presa_trio.testing import open_client

pytestmark = pytest.mark.e2e

RESOURCE = "http://127.0.0.1/mcp"
ISSUER = "https://auth.example.com"
NOW = 1_800_000_000.0
BASIC = "Basic " + base64.b64encode(b"mcp-server:s3cret").decode()


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Introspection:
    """The authorization server's introspection endpoint; counts the requests it answers."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, list[str]]] = []
        self.mode = "ok"
        self.release = trio.Event()
        self.asked = trio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = dict(scope["headers"])
        form = parse_qs(body.decode())
        self.requests.append(form)
        self.asked.set()
        status, answer = 200, {"active": False}
        if headers.get(b"authorization", b"").decode() != BASIC:
            status, answer = 401, {"error": "invalid_client"}
        elif self.mode == "down":
            status, answer = 503, {"error": "maintenance"}
        elif self.mode == "hang":
            await trio.sleep_forever()
        elif self.mode == "gate":
            await self.release.wait()
        if status == 200:
            answer = self.tokens.get(form["token"][0], answer)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


def active(sub: str, **claims: Any) -> dict[str, Any]:
    found = {"active": True, "sub": sub, "scope": "read", "aud": RESOURCE, "exp": NOW + 600}
    return {**found, "client_id": "app", "iss": ISSUER, **claims}


@asynccontextmanager
async def endpoint(app: Introspection) -> AsyncIterator[str]:
    """``app`` served by hypercorn on 127.0.0.1 (a free port); its URL."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 0.1
    async with trio.open_nursery() as nursery:
        shutdown = trio.Event()
        binds = await nursery.start(
            lambda task_status: serve(
                app, config, shutdown_trigger=shutdown.wait, task_status=task_status
            )
        )
        yield binds[0] + "/introspect"
        shutdown.set()


def closed_port_url() -> str:
    with socket.socket() as probe:  # bound, never listening: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        return f"http://127.0.0.1:{port}/introspect"


def protected(verifier: IntrospectionVerifier, clock: Clock) -> Any:
    server = Server("introspected")

    @server.tool(thread=False)
    def whoami(ctx: Context) -> str:
        assert ctx.access_token is not None
        return f"{ctx.access_token.subject} {sorted(ctx.access_token.scopes)}"

    auth = BearerAuth(
        verifier, resource=RESOURCE, authorization_servers=[ISSUER], clock=clock, verify_timeout=5
    )
    return server.asgi_app(auth=auth)


def introspecting(url: str, clock: Clock, **options: Any) -> IntrospectionVerifier:
    return IntrospectionVerifier(
        url, client_id="mcp-server", client_secret="s3cret", clock=clock, **options
    )


async def test_an_active_token_is_its_principal_and_is_cached_until_its_exp() -> None:
    app, clock = Introspection(), Clock()
    app.tokens["good"] = active("alice", exp=NOW + 30)
    async with (
        endpoint(app) as url,
        open_client(
            protected(introspecting(url, clock, cache_ttl=60), clock), token="good"
        ) as client,
    ):
        with trio.fail_after(10):
            for _ in range(3):
                result = await client.call_tool("whoami")
                assert result["structuredContent"] == {"result": "alice ['read']"}
            assert len(app.requests) == 1  # cached
            assert app.requests[0] == {"token": ["good"], "token_type_hint": ["access_token"]}
            clock.now = NOW + 29
            await client.call_tool("whoami")
            assert len(app.requests) == 1
            app.tokens["good"] = active("alice", exp=NOW + 600)  # the server renewed it
            clock.now = NOW + 31  # past the first exp: asked again
            await client.call_tool("whoami")
            assert len(app.requests) == 2
            clock.now = NOW + 31 + 60 + 1  # past cache_ttl, before exp: asked again
            await client.call_tool("whoami")
            assert len(app.requests) == 3


async def test_an_inactive_token_is_401_with_the_bearer_challenge_and_is_not_cached() -> None:
    app, clock = Introspection(), Clock()
    async with (
        endpoint(app) as url,
        open_client(protected(introspecting(url, clock), clock), token="revoked") as client,
    ):
        message = client.message("tools/call", {"name": "whoami"})
        with trio.fail_after(10):
            for _ in range(2):
                answered = await client.send(message)
                assert answered.status == 401
                challenge = answered.headers["www-authenticate"]
                assert challenge.startswith('Bearer error="invalid_token"')
                assert "resource_metadata=" in challenge
        assert len(app.requests) == 2  # an inactive answer is not kept


@pytest.mark.parametrize(
    "answer",
    [
        active("alice", aud="https://other.example.com/mcp"),  # another resource's token
        active("alice", exp=NOW - 1),  # expired
        {k: v for k, v in active("alice").items() if k != "aud"},  # no audience at all
        active("alice", scope=7),  # a scope that is no scope
    ],
)
async def test_an_active_answer_not_for_this_resource_is_401(answer: dict[str, Any]) -> None:
    app, clock = Introspection(), Clock()
    app.tokens["t"] = answer
    async with (
        endpoint(app) as url,
        open_client(protected(introspecting(url, clock), clock), token="t") as client,
    ):
        with trio.fail_after(10):
            answered = await client.send(client.message("tools/call", {"name": "whoami"}))
    assert answered.status == 401


async def test_an_unreachable_endpoint_is_a_retryable_503() -> None:
    clock = Clock()
    async with open_client(
        protected(introspecting(closed_port_url(), clock), clock), token="good"
    ) as client:
        with trio.fail_after(10):
            answered = await client.send(client.message("tools/call", {"name": "whoami"}))
    assert answered.status == 503
    [refused] = answered.messages
    assert refused["error"]["code"] == -32603
    assert refused["error"]["data"] == {"retryable": True}


@pytest.mark.parametrize("mode", ["down", "hang", "bad credentials"])
async def test_a_failing_or_slow_endpoint_is_a_retryable_503(mode: str) -> None:
    app, clock = Introspection(), Clock()
    app.tokens["good"] = active("alice")
    app.mode = mode
    async with endpoint(app) as url:
        verifier = IntrospectionVerifier(
            url,
            client_id="mcp-server",
            client_secret="wrong" if mode == "bad credentials" else "s3cret",
            clock=clock,
            timeout=0.5,
        )
        with trio.fail_after(10), pytest.raises(ServiceUnavailable) as caught:
            await verifier.verify("good")
    assert caught.value.data == {"retryable": True}
    assert caught.value.http_status == 503


async def test_concurrent_checks_of_one_token_share_one_request() -> None:
    app, clock = Introspection(), Clock()
    app.tokens["good"] = active("alice")
    app.mode = "gate"
    async with endpoint(app) as url:
        verifier = introspecting(url, clock)
        found: list[Any] = []

        async def check() -> None:
            found.append(await verifier.verify("good"))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(check)
                await app.asked.wait()
                await trio.testing.wait_all_tasks_blocked()  # the other four wait for it
                assert len(verifier._flights) == 1
                app.release.set()
    assert len(app.requests) == 1
    assert [access.subject for access in found] == ["alice"] * 5


async def test_the_cache_is_bounded_and_keyed_by_a_hash_of_the_token() -> None:
    app, clock = Introspection(), Clock()
    for name in ("a", "b", "c"):
        app.tokens[name] = active(name)
    async with endpoint(app) as url:
        verifier = introspecting(url, clock, max_entries=2)
        with trio.fail_after(10):
            for name in ("a", "b", "c", "c", "b", "a"):
                access = await verifier.verify(name)
                assert access is not None and access.subject == name
    # a and b were kept, then c evicted a (the least recently used); a was asked again
    assert [r["token"][0] for r in app.requests] == ["a", "b", "c", "a"]
    assert all(len(key) == 32 for key in verifier._cache)  # sha256 digests, not tokens
    assert len(verifier._cache) == 2


def test_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValueError, match="together"):
        IntrospectionVerifier("https://auth.example.com/introspect", client_id="x")
    with pytest.raises(ValueError):
        IntrospectionVerifier("https://auth.example.com/introspect", timeout=0)
