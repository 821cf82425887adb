"""``JwtVerifier(jwks_url=...)``: the signing keys fetched over HTTP (httpx, here through an
in-process ASGI transport), cached, refreshed on rotation, and every wait bounded: a made-up
key id, a slow or broken authorization server, an oversized document."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
import trio.testing
from joserfc import jwk, jwt

from presa_trio.auth import JwtVerifier
from presa_trio.errors import ServiceUnavailable

NOW = 1_800_000_000
ISSUER = "https://auth.example.com"
URL = "https://auth.example.com/jwks.json"
OLD = jwk.ECKey.generate_key("P-256", auto_kid=True)
NEW = jwk.ECKey.generate_key("P-256", auto_kid=True)
STRANGER = jwk.ECKey.generate_key("P-256", auto_kid=True)


def token(key: Any, kid: str | None = None) -> str:
    claims = {"iss": ISSUER, "sub": "alice", "aud": "https://mcp.example.com/mcp", "exp": NOW + 60}
    return jwt.encode({"alg": "ES256", "kid": kid or key.kid}, claims, key, algorithms=["ES256"])


class Jwks:
    """The authorization server's JWKS endpoint, as an ASGI app that counts its fetches."""

    def __init__(self, *keys: Any) -> None:
        self.keys = list(keys)
        self.fetches = 0
        self.mode = "ok"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.fetches += 1
        assert scope["path"] == "/jwks.json"
        if self.mode == "hang":
            await trio.sleep_forever()
        status, body = 200, jwk.KeySet(self.keys).as_dict(private=False)
        payload = httpx.Response(200, json=body).content
        if self.mode == "down":
            status, payload = 503, b"maintenance"
        elif self.mode.startswith("huge"):
            payload += b" " * 300_000  # the right keys, in a document too large to take
        elif self.mode == "garbage":
            payload = b"<html>"
        headers = [(b"content-type", b"application/json")]
        if self.mode == "huge, declared":
            headers.append((b"content-length", str(len(payload)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def verifier(server: Jwks, **options: Any) -> JwtVerifier:
    return JwtVerifier(
        jwks_url=URL,
        issuer=ISSUER,
        clock=lambda: NOW,
        http_client=lambda: httpx.AsyncClient(transport=httpx.ASGITransport(app=server)),
        **options,
    )


async def test_keys_are_fetched_once_and_cached(autojump_clock: trio.testing.MockClock) -> None:
    server = Jwks(OLD)
    check = verifier(server, jwks_ttl=300)
    for _ in range(3):
        found = await check.verify(token(OLD))
        assert found is not None and found.subject == "alice"
    assert server.fetches == 1
    await trio.sleep(301)  # past the TTL: fetched again
    assert await check.verify(token(OLD)) is not None
    assert server.fetches == 2


async def test_a_rotated_key_is_fetched_when_a_token_names_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Jwks(OLD)
    check = verifier(server, jwks_min_refresh=10)
    assert await check.verify(token(OLD)) is not None
    await trio.sleep(10)
    server.keys = [OLD, NEW]
    assert await check.verify(token(NEW)) is not None
    assert server.fetches == 2


async def test_made_up_key_ids_fetch_at_most_once_per_min_refresh(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Jwks(OLD)
    check = verifier(server, jwks_min_refresh=10)
    assert await check.verify(token(OLD)) is not None
    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(check.verify, token(STRANGER, kid=f"made-up-{n}"))
    assert server.fetches == 1  # all within min_refresh of the first fetch
    await trio.sleep(10)
    assert await check.verify(token(STRANGER)) is None  # one more try: still unknown
    assert await check.verify(token(STRANGER)) is None
    assert server.fetches == 2
    assert await check.verify(token(OLD)) is not None  # the known key goes on verifying


async def test_garbage_tokens_never_cause_a_fetch() -> None:
    server = Jwks(OLD)
    check = verifier(server)
    for bad in ("x", "a.b.c", "", "...."):
        assert await check.verify(bad) is None
    assert server.fetches == 0


@pytest.mark.parametrize(
    ("mode", "logged"),
    [
        ("down", "failed: ValueError('HTTP 503')"),
        ("huge", "failed: ValueError('the document is over 262144 bytes')"),
        ("huge, declared", "failed: ValueError('the document is over 262144 bytes')"),
        ("garbage", "failed: JSONDecodeError"),
        ("hang", "took over 2 s"),
    ],
)
async def test_no_keys_at_all_is_a_retryable_503(
    mode: str,
    logged: str,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Jwks(OLD)
    server.mode = mode
    check = verifier(server, jwks_fetch_timeout=2, jwks_min_refresh=10)
    start = trio.current_time()
    with pytest.raises(ServiceUnavailable):
        await check.verify(token(OLD))
    assert trio.current_time() - start <= 2
    assert f"fetching the JWKS at https://auth.example.com/jwks.json {logged}" in caplog.text
    with pytest.raises(ServiceUnavailable):  # not tried again so soon
        await check.verify(token(OLD))
    assert server.fetches == 1
    server.mode = "ok"
    await trio.sleep(10)
    assert await check.verify(token(OLD)) is not None


async def test_an_outage_keeps_the_keys_already_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Jwks(OLD)
    check = verifier(server, jwks_ttl=60, jwks_fetch_timeout=2)
    assert await check.verify(token(OLD)) is not None
    server.mode = "hang"
    await trio.sleep(61)
    assert await check.verify(token(OLD)) is not None  # stale, but still the issuer's key
    assert server.fetches == 2


def test_exactly_one_key_source() -> None:
    with pytest.raises(ValueError):
        JwtVerifier(issuer=ISSUER)
    with pytest.raises(ValueError):
        JwtVerifier(issuer=ISSUER, jwks={"keys": [OLD.as_dict(private=False)]}, jwks_url=URL)
    with pytest.raises(ValueError):
        JwtVerifier(issuer=ISSUER, jwks_url="http://auth.example.com/jwks.json")
    with pytest.raises(RuntimeError):
        JwtVerifier(issuer=ISSUER, jwks_url=URL).verify_now(token(OLD))


async def test_requests_that_arrive_together_share_one_fetch() -> None:
    server = Jwks(OLD)
    check = verifier(server)
    verified: list[object] = []

    async def one() -> None:
        verified.append(await check.verify(token(OLD)))

    async with trio.open_nursery() as nursery:
        for _ in range(10):
            nursery.start_soon(one)
    assert server.fetches == 1
    assert len(verified) == 10 and None not in verified
