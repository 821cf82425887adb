"""``BearerAuth``: what a request's ``Authorization`` header values come to, a verified
token or the exact refusal (status, code, challenge), with the verifier bounded in time and
its failures kept from the client; and the scope decisions, hierarchy included."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from presa_trio.auth import AccessToken, BearerAuth
from presa_trio.auth._bearer import Authorization
from presa_trio.errors import InsufficientScope, McpError, Unauthorized

RESOURCE = "https://mcp.example.com/mcp"
METADATA = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
NOW = 1_800_000_000.0
ALICE = AccessToken(subject="alice", scopes=frozenset({"read"}), expires_at=NOW + 60)


class Table:
    """A verifier that looks tokens up, and counts its calls."""

    def __init__(self, tokens: dict[str, Any]) -> None:
        self.tokens = tokens
        self.calls = 0

    async def verify(self, token: str) -> Any:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        return self.tokens.get(token)


def bearer(verifier: Any = None, **options: Any) -> BearerAuth:
    options.setdefault("resource", RESOURCE)
    options.setdefault("authorization_servers", ["https://auth.example.com"])
    return BearerAuth(verifier or Table({"a": ALICE}), clock=lambda: NOW, **options)


async def refusal(auth: BearerAuth, values: list[str]) -> McpError:
    with pytest.raises(McpError) as caught:
        await auth.authenticate(values)
    return caught.value


async def test_a_good_token_is_its_access_token() -> None:
    assert await bearer().authenticate(["Bearer a"]) is ALICE


@pytest.mark.parametrize("values", [[], ["Basic dXNlcjpwYXNz"]])
async def test_no_bearer_token_is_401_with_a_bare_challenge(values: list[str]) -> None:
    error = await refusal(bearer(), values)
    assert type(error) is Unauthorized
    assert (error.code, error.http_status) == (-32600, 401)
    assert error.http_headers == (("www-authenticate", f'Bearer resource_metadata="{METADATA}"'),)


async def test_the_required_scopes_are_in_every_401_challenge() -> None:
    auth = bearer(required_scopes=["mcp:use"])
    error = await refusal(auth, [])
    challenge = f'Bearer scope="mcp:use", resource_metadata="{METADATA}"'
    assert error.http_headers == (("www-authenticate", challenge),)
    error = await refusal(auth, ["Bearer nope"])
    challenge = f'Bearer error="invalid_token", scope="mcp:use", resource_metadata="{METADATA}"'
    assert error.http_headers == (("www-authenticate", challenge),)


async def test_a_malformed_header_is_400_invalid_request() -> None:
    table = Table({})
    for values in (["Bearer"], ["Bearer a b"], ["Bearer a", "Bearer a"]):
        error = await refusal(bearer(table), values)
        assert (error.code, error.http_status) == (-32600, 400)
        challenge = f'Bearer error="invalid_request", resource_metadata="{METADATA}"'
        assert error.http_headers == (("www-authenticate", challenge),)
    assert table.calls == 0


@pytest.mark.parametrize(
    "token",
    [
        None,  # the verifier does not know it
        AccessToken(subject="alice", expires_at=NOW),  # expired
        AccessToken(subject="alice", expires_at=NOW - 1),
        AccessToken(subject="alice", audience=("https://other.example.com/mcp",)),
        AccessToken(subject="alice", audience=()),
        AccessToken(),  # names no one: it cannot be a principal
        AccessToken(subject=""),
    ],
)
async def test_a_token_not_valid_here_is_401_invalid_token(token: AccessToken | None) -> None:
    error = await refusal(bearer(Table({"t": token})), ["Bearer t"])
    assert type(error) is Unauthorized
    assert error.http_status == 401
    challenge = f'Bearer error="invalid_token", resource_metadata="{METADATA}"'
    assert error.http_headers == (("www-authenticate", challenge),)


@pytest.mark.parametrize(
    "token",
    [
        AccessToken(subject="alice", expires_at=NOW + 1),
        AccessToken(subject="alice", audience=("https://MCP.example.com:443/mcp/", "x")),
        AccessToken(client_id="robot"),
    ],
)
async def test_a_token_valid_here_is_accepted(token: AccessToken) -> None:
    assert await bearer(Table({"t": token})).authenticate(["Bearer t"]) is token


async def test_a_token_too_long_is_refused_unread() -> None:
    table = Table({"a" * 20: ALICE})
    error = await refusal(bearer(table, max_token_bytes=19), ["Bearer " + "a" * 20])
    assert error.http_status == 401
    assert table.calls == 0


async def test_missing_required_scopes_are_403_naming_them_all() -> None:
    auth = bearer(required_scopes=["read", "mcp:use", "write"])
    error = await refusal(auth, ["Bearer a"])
    assert type(error) is InsufficientScope
    assert (error.code, error.http_status) == (-32600, 403)
    assert error.data == {"requiredScopes": ["read", "mcp:use", "write"]}
    challenge = (
        f'Bearer error="insufficient_scope", scope="read mcp:use write", '
        f'resource_metadata="{METADATA}"'
    )
    assert error.http_headers == (("www-authenticate", challenge),)


class Raising:
    async def verify(self, token: str) -> AccessToken | None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("introspection endpoint said: secret detail")


async def test_a_verifier_that_fails_is_a_500_without_detail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = await refusal(bearer(Raising()), ["Bearer a"])
    assert (error.code, error.http_status, error.message) == (-32603, 500, "Internal error")
    assert error.http_headers == ()
    assert [r.getMessage() for r in caplog.records] == ["verifying a bearer token failed"]
    assert "secret detail" not in error.message


class Refusing:
    async def verify(self, token: str) -> AccessToken | None:
        await trio.lowlevel.checkpoint()
        raise Unauthorized("Unauthorized: revoked", 'Bearer error="invalid_token"')


async def test_a_verifiers_own_protocol_error_stands() -> None:
    error = await refusal(bearer(Refusing()), ["Bearer a"])
    assert (type(error), error.message) == (Unauthorized, "Unauthorized: revoked")


class Wrong:
    async def verify(self, token: str) -> Any:
        await trio.lowlevel.checkpoint()
        return {"sub": "alice"}


async def test_a_verifier_that_returns_something_else_is_a_500() -> None:
    error = await refusal(bearer(Wrong()), ["Bearer a"])
    assert (error.code, error.http_status) == (-32603, 500)


class Hanging:
    def __init__(self) -> None:
        self.cancelled = False

    async def verify(self, token: str) -> AccessToken | None:
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled = True


async def test_a_verifier_that_hangs_is_cut_off_with_a_retryable_503(
    autojump_clock: trio.testing.MockClock,
) -> None:
    hanging = Hanging()
    start = trio.current_time()
    error = await refusal(bearer(hanging, verify_timeout=2.5), ["Bearer a"])
    assert trio.current_time() - start == 2.5
    assert (error.code, error.http_status) == (-32603, 503)
    assert error.data == {"retryable": True}
    assert hanging.cancelled


async def test_cancellation_passes_through_verification() -> None:
    hanging = Hanging()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bearer(hanging).authenticate, ["Bearer a"])
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert hanging.cancelled


def test_scope_hierarchy_is_followed_transitively() -> None:
    auth = bearer(scope_hierarchy={"admin": ["write"], "write": ["read"], "ops": ["deploy"]})
    admin = AccessToken(subject="a", scopes=frozenset({"admin"}))
    assert auth.granted(admin) == {"admin", "write", "read"}
    auth.require(admin, ["read", "write"])
    with pytest.raises(InsufficientScope) as caught:
        auth.require(admin, ["read", "deploy", "read"])
    assert caught.value.scopes == ["read", "deploy"]


def test_a_request_without_a_verified_token_holds_no_scope() -> None:
    Authorization().require([])  # nothing asked, nothing refused
    with pytest.raises(InsufficientScope) as caught:
        Authorization().require(["deploy", "deploy"])
    assert caught.value.http_headers == (
        ("www-authenticate", 'Bearer error="insufficient_scope", scope="deploy"'),
    )
    auth = bearer(required_scopes=["mcp:use"])
    holder = AccessToken(subject="a", scopes=frozenset({"mcp:use"}))
    with pytest.raises(InsufficientScope) as caught:
        Authorization(holder, auth).require(["deploy"])
    assert caught.value.scopes == ["mcp:use", "deploy"]
    Authorization(holder, auth).require(["mcp:use"])


def test_the_metadata_document_and_where_it_is_served() -> None:
    auth = bearer(scopes_supported=["read", "deploy"], resource_name="Deployer")
    assert auth.metadata == {
        "resource": RESOURCE,
        "authorization_servers": ["https://auth.example.com"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["read", "deploy"],
        "resource_name": "Deployer",
    }
    assert auth.resource_metadata == METADATA
    assert auth.metadata_paths("/mcp") == {
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    }


@pytest.mark.parametrize(
    "options",
    [
        {"resource": "http://mcp.example.com/mcp"},
        {"resource": "https://mcp.example.com/mcp#x"},
        {"authorization_servers": []},
        {"scopes_supported": ["read", "offline_access"]},
        {"required_scopes": ["a b"]},
        {"scope_hierarchy": {"admin": "read"}},
        {"scope_hierarchy": {"ad min": ["read"]}},
        {"verify_timeout": 0},
        {"resource_documentation": "docs"},
    ],
)
def test_bad_configuration(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        bearer(**options)
