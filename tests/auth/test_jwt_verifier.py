"""Unit tests for presa_trio.auth.JwtVerifier: signature against a static JWK set, ``iss``,
``aud``, ``exp``/``nbf``/``iat`` with leeway, and the scopes of ``scope`` or ``scp``.

Tokens are signed here with keys made for the test; the clock is a fixed number.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import pytest
from joserfc import jwk, jwt

from presa_trio.auth import AccessToken, JwtVerifier

NOW = 1_800_000_000
ISSUER = "https://auth.example.com"
RESOURCE = "https://mcp.example.com/mcp"
KEY = jwk.ECKey.generate_key("P-256", auto_kid=True)
OTHER_KEY = jwk.ECKey.generate_key("P-256", auto_kid=True)
SECRET = jwk.OctKey.generate_key(256, auto_kid=True)


def jwks(*keys: Any) -> dict[str, Any]:
    return {"keys": [k.as_dict(private=False) for k in keys]}


def claims(**changes: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "iss": ISSUER,
        "sub": "alice",
        "aud": RESOURCE,
        "exp": NOW + 300,
        "iat": NOW - 10,
        "client_id": "cli",
        "scope": "read deploy",
    }
    found.update(changes)
    return {k: v for k, v in found.items() if v is not None}


def sign(payload: dict[str, Any], key: Any = KEY, alg: str = "ES256", **header: Any) -> str:
    return jwt.encode({"alg": alg, "kid": key.kid, **header}, payload, key, algorithms=[alg])


def unsigned(payload: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none', 'kid': KEY.kid})}.{part(payload)}."


def verifier(**options: Any) -> JwtVerifier:
    options.setdefault("jwks", jwks(KEY))
    options.setdefault("issuer", ISSUER)
    return JwtVerifier(clock=lambda: NOW, **options)


def test_a_good_token() -> None:
    payload = claims()
    found = verifier().verify_now(sign(payload))
    assert found == AccessToken(
        subject="alice",
        client_id="cli",
        scopes=frozenset({"read", "deploy"}),
        expires_at=float(NOW + 300),
        issuer=ISSUER,
        audience=(RESOURCE,),
        claims=payload,
    )
    assert found.principal == "alice"


async def test_verify_is_the_same_check_behind_a_checkpoint() -> None:
    token = sign(claims())
    assert await verifier().verify(token) == verifier().verify_now(token)
    assert await verifier().verify("nonsense") is None


@pytest.mark.parametrize(
    ("payload", "scopes"),
    [
        (claims(scope=None), frozenset()),
        (claims(scope=""), frozenset()),
        (claims(scope="  a   b "), frozenset({"a", "b"})),
        (claims(scope=None, scp=["x", "y"]), frozenset({"x", "y"})),
        (claims(scope=None, scp="x y"), frozenset({"x", "y"})),
    ],
)
def test_scopes_come_from_scope_or_scp(payload: dict[str, Any], scopes: frozenset[str]) -> None:
    found = verifier().verify_now(sign(payload))
    assert found is not None
    assert found.scopes == scopes


def test_the_client_is_client_id_else_azp() -> None:
    found = verifier().verify_now(sign(claims(client_id=None, azp="web")))
    assert found is not None and found.client_id == "web"
    found = verifier().verify_now(sign(claims(client_id=None, sub=None)))
    assert found is not None and found.principal == ""  # BearerAuth refuses it


def test_several_issuers_and_audiences() -> None:
    other = "https://login.example.org/tenant"
    token = sign(claims(iss=other, aud=["https://elsewhere", RESOURCE]))
    found = verifier(issuer=[ISSUER, other], audience=RESOURCE).verify_now(token)
    assert found is not None
    assert found.audience == ("https://elsewhere", RESOURCE)


def test_the_audience_is_compared_in_canonical_form() -> None:
    token = sign(claims(aud="https://MCP.example.com:443/mcp/"))
    assert verifier(audience=RESOURCE).verify_now(token) is not None


def test_a_key_set_as_json_text_and_a_single_key() -> None:
    token = sign(claims())
    assert verifier(jwks=json.dumps(jwks(OTHER_KEY, KEY))).verify_now(token) is not None
    assert verifier(jwks=KEY.as_dict(private=False)).verify_now(token) is not None


def test_private_key_material_is_not_kept() -> None:
    held = verifier(jwks={"keys": [KEY.as_dict(private=True)]})
    assert held.verify_now(sign(claims())) is not None
    assert not any(key.is_private for key in held._keys)


def test_hs256_only_when_asked_for() -> None:
    token = sign(claims(), key=SECRET, alg="HS256")
    secret = {"keys": [SECRET.as_dict(private=True)]}
    assert verifier(jwks=secret).verify_now(token) is None
    assert verifier(jwks=secret, algorithms=["HS256"]).verify_now(token) is not None


@pytest.mark.parametrize(
    ("why", "token"),
    [
        ("another key", sign(claims(), key=OTHER_KEY)),
        (
            "another key under our kid",
            jwt.encode({"alg": "ES256", "kid": KEY.kid}, claims(), OTHER_KEY, algorithms=["ES256"]),
        ),
        ("another issuer", sign(claims(iss="https://evil.example.com"))),
        ("no issuer", sign(claims(iss=None))),
        ("no audience", sign(claims(aud=None))),
        ("empty audience", sign(claims(aud=[]))),
        ("expired", sign(claims(exp=NOW - 31))),
        ("no expiry", sign(claims(exp=None))),
        ("expiry not a number", sign(claims(exp="soon"))),
        ("expiry beyond a float", sign(claims(exp=10**400))),
        ("not yet valid", sign(claims(nbf=NOW + 31))),
        ("issued in the future", sign(claims(iat=NOW + 31))),
        ("scope of another shape", sign(claims(scope=None, scp=[1, 2]))),
        ("scope a number", sign(claims(scope=7))),
        ("subject not a string", sign(claims(sub=7))),
        ("client not a string", sign(claims(client_id=["a"]))),
        ("not a JWT", "abc.def.ghi"),
        ("garbage", "x"),
        ("unsigned", unsigned(claims())),
    ],
)
def test_what_is_refused(why: str, token: str) -> None:
    assert verifier().verify_now(token) is None, why


def test_a_tampered_payload_is_refused() -> None:
    header, _, signature = sign(claims()).split(".")
    forged = jwt.encode({"alg": "ES256"}, claims(sub="root"), OTHER_KEY).split(".")[1]
    assert verifier().verify_now(f"{header}.{forged}.{signature}") is None


def test_another_audience_is_refused_when_the_verifier_names_one() -> None:
    token = sign(claims(aud="https://other.example.com/mcp"))
    assert verifier(audience=RESOURCE).verify_now(token) is None
    # Without ``audience`` it is BearerAuth's check: the token says which audience it has.
    found = verifier().verify_now(token)
    assert found is not None and found.audience == ("https://other.example.com/mcp",)


def test_leeway_absorbs_small_skew() -> None:
    assert verifier().verify_now(sign(claims(exp=NOW - 29))) is not None
    assert verifier().verify_now(sign(claims(nbf=NOW + 29))) is not None
    assert verifier(leeway=0).verify_now(sign(claims(exp=NOW))) is None


@pytest.mark.parametrize(
    "options",
    [
        {"issuer": []},
        {"algorithms": ["none"]},
        {"jwks": {"keys": []}},
        {"jwks": {"keys": "x"}},
    ],
)
def test_bad_configuration(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        verifier(**options)


def test_without_joserfc_the_error_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "joserfc" or m.startswith("joserfc.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "joserfc", None)
    with pytest.raises(ImportError, match=r"presa_trio\[jwt\]"):
        verifier()
