"""Unit tests for presa_trio.auth._challenge: reading ``Authorization: Bearer`` and writing
``WWW-Authenticate: Bearer`` (RFC 6750 §2.1, §3)."""

from __future__ import annotations

import pytest

from presa_trio._protocol.tokens import check_scopes
from presa_trio.auth._challenge import (
    MalformedCredentials,
    bearer_token,
    challenge,
    check_quotable,
)


@pytest.mark.parametrize(
    ("values", "token"),
    [
        (["Bearer abc"], "abc"),
        (["bearer abc.DEF-_~+/=="], "abc.DEF-_~+/=="),
        (["BEARER  abc  "], "abc"),
        ([" Bearer abc"], "abc"),
        (
            ["Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"],
            "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln",
        ),
    ],
)
def test_the_token_of_one_bearer_header(values: list[str], token: str) -> None:
    assert bearer_token(values) == token


@pytest.mark.parametrize(
    "values",
    [[], ["Basic dXNlcjpwYXNz"], ["Digest username=x"], ["Bearerabc"], ["Token abc"]],
)
def test_no_bearer_credential_is_none(values: list[str]) -> None:
    assert bearer_token(values) is None


@pytest.mark.parametrize(
    "values",
    [
        ["Bearer"],
        ["Bearer "],
        ["Bearer a b"],
        ['Bearer "abc"'],
        ["Bearer a=b"],
        ["Bearer abc,def"],
        ["Bearer ab\tc"],
        ["Bearer é"],
        ["Bearer abc", "Bearer abc"],
        ["Bearer abc", "Basic x"],
    ],
)
def test_a_malformed_bearer_credential_is_refused(values: list[str]) -> None:
    with pytest.raises(MalformedCredentials):
        bearer_token(values)


def test_a_bare_challenge() -> None:
    assert challenge() == "Bearer"
    url = "https://h/.well-known/oauth-protected-resource/mcp"
    assert challenge(resource_metadata=url) == f'Bearer resource_metadata="{url}"'


def test_a_full_challenge_names_every_parameter_once_in_a_fixed_order() -> None:
    assert challenge(
        error="insufficient_scope",
        scopes=["files:write", "deploy"],
        resource_metadata="https://h/.well-known/oauth-protected-resource",
        description="Needs more",
    ) == (
        'Bearer error="insufficient_scope", scope="files:write deploy", '
        'resource_metadata="https://h/.well-known/oauth-protected-resource", '
        'error_description="Needs more"'
    )
    assert challenge(error="invalid_token", scopes=()) == 'Bearer error="invalid_token"'


@pytest.mark.parametrize("value", ['say "hi"', "back\\slash", "new\nline", "naïve"])
def test_a_value_that_would_need_escaping_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="WWW-Authenticate"):
        check_quotable(value, "x")
    with pytest.raises(ValueError):
        challenge(description=value)


def test_scope_tokens() -> None:
    assert check_scopes(["read", "files:write", "a/b!#$%&'()*+,-./[]^_`{|}~"]) == (
        "read",
        "files:write",
        "a/b!#$%&'()*+,-./[]^_`{|}~",
    )
    assert check_scopes(()) == ()


@pytest.mark.parametrize("scopes", [["two words"], ['q"uote'], ["back\\slash"], [""], [1], "read"])
def test_what_is_not_a_scope_token_is_refused(scopes: object) -> None:
    with pytest.raises(ValueError):
        check_scopes(scopes)  # type: ignore[arg-type]
