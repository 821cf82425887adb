"""Unit tests for presa_trio._protocol.request_state: sealing and verifying MRTR requestState."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from presa_trio._protocol.request_state import (
    DEFAULT_TTL_SECONDS,
    KeyRing,
    StateSealer,
    Unsealed,
    binding_digest,
)
from presa_trio.errors import InvalidParams

KEY_A = b"a" * 32
KEY_B = b"b" * 32
NOW = 1_700_000_000.0
BINDING = binding_digest("tools/call", "deploy", {"region": "eu", "count": 2})
DATA: dict[str, Any] = {"step": 2, "answers": ["x", "é"], "nested": {"ok": True, "n": None}}

# Every character a token can hold, and the usual suspects a decoder might be lenient about.
ALPHABET = string.ascii_letters + string.digits + "-_+/=.!~ \n\x00é"


def sealer(*keys: tuple[str, bytes], ttl: float = DEFAULT_TTL_SECONDS) -> StateSealer:
    return StateSealer(KeyRing(list(keys) or [("k1", KEY_A)]), ttl=ttl)


def refused(s: StateSealer, token: object, binding: str = BINDING, now: float = NOW) -> None:
    with pytest.raises(InvalidParams) as caught:
        s.unseal(token, binding=binding, now=now)
    assert caught.value.code == -32602
    assert caught.value.http_status == 400


@pytest.fixture(scope="module")
def token() -> str:
    return sealer().seal(DATA, binding=BINDING, round=3, now=NOW)


# --- KeyRing ---------------------------------------------------------------------------------


def test_key_ring_signs_with_the_first_key() -> None:
    ring = KeyRing([("new", KEY_B), ("old", KEY_A)])
    assert ring.active == "new"
    assert ring.key("new") == KEY_B
    assert ring.key("old") == KEY_A
    assert ring.key("other") is None


def test_default_key_ring_is_random() -> None:
    a, b = KeyRing(), KeyRing()
    assert a.active == b.active
    key_a, key_b = a.key(a.active), b.key(b.active)
    assert key_a is not None
    assert len(key_a) >= 16
    assert key_a != key_b


@pytest.mark.parametrize(
    "keys", [[("", KEY_A)], [("a.b", KEY_A)], [("k", b"short")], [("k", b"x" * 15)]]
)
def test_key_ring_refuses_bad_keys(keys: list[tuple[str, bytes]]) -> None:
    with pytest.raises(ValueError):
        KeyRing(keys)


# --- binding_digest --------------------------------------------------------------------------


def test_binding_digest_is_stable_and_key_order_free() -> None:
    assert binding_digest("tools/call", "t", {"a": 1, "b": [1, 2]}) == binding_digest(
        "tools/call", "t", {"b": [1, 2], "a": 1}
    )
    assert isinstance(BINDING, str)
    assert "." not in BINDING


@pytest.mark.parametrize(
    "other",
    [
        ("prompts/get", "deploy", {"region": "eu", "count": 2}),
        ("tools/call", "Deploy", {"region": "eu", "count": 2}),
        ("tools/call", "deploy", {"region": "us", "count": 2}),
        ("tools/call", "deploy", {"region": "eu", "count": 3}),
        ("tools/call", "deploy", {"region": "eu", "count": 2, "extra": None}),
        ("tools/call", "deploy", {"region": "eu"}),
        ("tools/call", "deploy", {}),
        ("tools/call", None, {"region": "eu", "count": 2}),
    ],
)
def test_binding_digest_differs(other: tuple[str, Any, Any]) -> None:
    assert binding_digest(*other) != BINDING


# --- seal / unseal ---------------------------------------------------------------------------


def test_round_trip(token: str) -> None:
    got = sealer().unseal(token, binding=BINDING, now=NOW + 1)
    assert got == Unsealed(DATA, 3)
    assert got.data == DATA
    assert got.round == 3


@pytest.mark.parametrize("round_", [0, 1, 99])
def test_round_trip_rounds(round_: int) -> None:
    s = sealer()
    token = s.seal({}, binding=BINDING, round=round_, now=NOW)
    assert s.unseal(token, binding=BINDING, now=NOW) == Unsealed({}, round_)


def test_token_shape(token: str) -> None:
    version, key_id, body, mac = token.split(".")
    assert (version, key_id) == ("s1", "k1")
    assert set(body + mac) <= set(string.ascii_letters + string.digits + "-_")


def test_two_seals_of_the_same_data_differ() -> None:
    s = sealer()
    first = s.seal(DATA, binding=BINDING, round=1, now=NOW)
    second = s.seal(DATA, binding=BINDING, round=1, now=NOW)
    assert first != second
    assert s.unseal(first, binding=BINDING, now=NOW) == s.unseal(second, binding=BINDING, now=NOW)


@pytest.mark.parametrize(
    "other",
    [
        binding_digest("prompts/get", "deploy", {"region": "eu", "count": 2}),
        binding_digest("tools/call", "other", {"region": "eu", "count": 2}),
        binding_digest("tools/call", "deploy", {"region": "us", "count": 2}),
        "",
    ],
)
def test_other_binding_fails(token: str, other: str) -> None:
    refused(sealer(), token, binding=other)


def test_expiry() -> None:
    s = sealer(ttl=60)
    token = s.seal(DATA, binding=BINDING, round=1, now=NOW)
    assert s.unseal(token, binding=BINDING, now=NOW + 59).round == 1
    refused(s, token, now=NOW + 61)
    refused(s, token, now=NOW + 10_000)


def test_default_ttl(token: str) -> None:
    assert DEFAULT_TTL_SECONDS == 600.0
    assert sealer().unseal(token, binding=BINDING, now=NOW + 599).round == 3
    refused(sealer(), token, now=NOW + 601)


def test_rotation_keeps_old_states_while_the_old_key_is_in_the_ring() -> None:
    old = sealer(("old", KEY_A))
    token = old.seal(DATA, binding=BINDING, round=1, now=NOW)
    rotated = sealer(("new", KEY_B), ("old", KEY_A))
    assert rotated.unseal(token, binding=BINDING, now=NOW).data == DATA
    fresh = rotated.seal(DATA, binding=BINDING, round=2, now=NOW)
    assert fresh.split(".")[1] == "new"
    refused(old, fresh)
    retired = sealer(("new", KEY_B))
    refused(retired, token)
    assert retired.unseal(fresh, binding=BINDING, now=NOW).round == 2


@pytest.mark.parametrize(
    "foreign",
    [
        StateSealer(),
        StateSealer(KeyRing([("k1", KEY_B)])),
        StateSealer(KeyRing([("k2", KEY_A)])),
        StateSealer(KeyRing([("k2", KEY_B), ("k3", KEY_A)])),
    ],
)
def test_foreign_ring_fails(token: str, foreign: StateSealer) -> None:
    refused(foreign, token)


def test_default_sealers_do_not_trust_each_other() -> None:
    token = StateSealer().seal(DATA, binding=BINDING, round=1, now=NOW)
    refused(StateSealer(), token)


@pytest.mark.parametrize(
    "token",
    [
        None,
        1,
        1.5,
        True,
        b"s1.k1.a.b",
        ["s1", "k1"],
        {"t": 1},
        "",
        "garbage",
        "....",
        "s1.k1",
        "s1.k1.body",
        "s1.k1.body.mac.extra",
        "s2.k1.body.mac",
        "s1.nokey.body.mac",
        ".k1.body.mac",
        "s1.k1..",
        "s1.k1.é.é",
    ],
)
def test_malformed_tokens_fail(token: object) -> None:
    refused(sealer(), token)


def test_wrong_number_of_dots(token: str) -> None:
    parts = token.split(".")
    refused(sealer(), ".".join(parts[:3]))
    refused(sealer(), token + ".")
    refused(sealer(), token + ".x")
    refused(sealer(), "." + token)


def test_truncated_tokens_fail(token: str) -> None:
    s = sealer()
    for end in range(len(token)):
        refused(s, token[:end])


@pytest.mark.parametrize("extra", ["A", "=", "==", "~!", "!!", ".", " "])
@pytest.mark.parametrize("where", ["end", "inside-mac", "body-start"])
def test_inserted_characters_fail(token: str, extra: str, where: str) -> None:
    i = {"end": len(token), "inside-mac": len(token) - 10, "body-start": len("s1.k1.")}[where]
    refused(sealer(), token[:i] + extra + token[i:])


def test_every_single_character_substitution_fails(token: str) -> None:
    s = sealer()
    accepted = []
    for i, old in enumerate(token):
        for new in ALPHABET:
            if new == old:
                continue
            mutated = token[:i] + new + token[i + 1 :]
            try:
                s.unseal(mutated, binding=BINDING, now=NOW)
            except InvalidParams:
                continue
            accepted.append((i, old, new))
    assert accepted == []


B64URL = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
MUTATIONS = settings(max_examples=300, deadline=None, database=None)


@MUTATIONS
@given(position=st.integers(-400, 400), other=st.characters(codec="utf-8"))
def test_any_single_character_replacement_fails(token: str, position: int, other: str) -> None:
    i = position % len(token)
    assume(other != token[i])
    refused(sealer(), token[:i] + other + token[i + 1 :])


@MUTATIONS
@given(position=st.integers(-400, 400), mask=st.integers(1, 63))
@example(position=-1, mask=1)  # the MAC's last character: its two low bits are padding
def test_any_single_bit_flip_in_the_base64_text_fails(token: str, position: int, mask: int) -> None:
    """Flip bits of one base64url character (a '.' or the version stays a plain replacement)."""
    i = position % len(token)
    old = token[i]
    new = B64URL[B64URL.index(old) ^ mask] if old in B64URL else "A"
    assume(new != old)
    refused(sealer(), token[:i] + new + token[i + 1 :])
