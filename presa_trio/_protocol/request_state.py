"""Sealing and unsealing MRTR ``requestState`` with HMAC-SHA256 and a key ring (wire §10.4).

Pure: the caller passes ``now``. A sealed state is bound to the method, the name and a digest
of the arguments it was issued for, carries an expiry, a round counter and a nonce, and names
the key that signed it so keys can rotate. It is signed, not encrypted: put nothing secret in it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

from ..errors import InternalError, InvalidParams

_VERSION = "s1"
DEFAULT_TTL_SECONDS = 600.0
#: The largest ``requestState`` a server issues: it must come back inside a request body.
DEFAULT_MAX_STATE_BYTES = 65_536


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict base64url: only the canonical spelling decodes (no spare bits, no padding)."""
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("non-canonical base64")
    return data


def binding_digest(method: str, name: object, arguments: object, principal: str = "") -> str:
    """What a state is bound to: method, name/uri, canonical arguments and the principal."""
    canonical = json.dumps(
        [method, name, arguments, principal], sort_keys=True, separators=(",", ":")
    )
    return _b64(hashlib.sha256(canonical.encode()).digest()[:16])


@dataclass(frozen=True, slots=True)
class Unsealed:
    """A verified state: the handler's data and which round it closed."""

    data: Mapping[str, Any]
    round: int


@final
class KeyRing:
    """HMAC keys by id. The first key signs; all of them verify (so old states survive a rotation).

    With no keys a random per-process key is generated: fine for one worker, but several
    workers (or a restart) need the same keys from configuration.
    """

    def __init__(self, keys: Sequence[tuple[str, bytes]] | None = None) -> None:
        if not keys:
            keys = [("k0", secrets.token_bytes(32))]
        for key_id, key in keys:
            if not key_id or "." in key_id or len(key) < 16:
                raise ValueError("key ids must be non-empty without '.', keys at least 16 bytes")
        self._keys = dict(keys)
        self.active = keys[0][0]

    def key(self, key_id: str) -> bytes | None:
        return self._keys.get(key_id)


@final
class StateSealer:
    """Issues and verifies ``requestState`` strings for one server."""

    def __init__(
        self,
        ring: KeyRing | None = None,
        ttl: float = DEFAULT_TTL_SECONDS,
        max_bytes: int = DEFAULT_MAX_STATE_BYTES,
    ) -> None:
        self.ring = ring if ring is not None else KeyRing()
        self.ttl = ttl
        self.max_bytes = max_bytes

    def seal(self, data: Mapping[str, Any], *, binding: str, round: int, now: float) -> str:
        payload = {
            "b": binding,
            "x": int((now + self.ttl) * 1000),
            "r": round,
            "n": _b64(secrets.token_bytes(8)),
            "d": data,
        }
        try:
            text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            body = _b64(text.encode())
        except (TypeError, ValueError, UnicodeEncodeError):
            raise InternalError("A handler's requestState data is not JSON") from None
        signed = f"{_VERSION}.{self.ring.active}.{body}"
        mac = hmac.new(self.ring.key(self.ring.active) or b"", signed.encode(), hashlib.sha256)
        token = f"{signed}.{_b64(mac.digest())}"
        if len(token) > self.max_bytes:  # it could never come back: refuse to issue it
            raise InternalError(f"requestState would be larger than {self.max_bytes} bytes")
        return token

    def unseal(self, token: object, *, binding: str, now: float) -> Unsealed:
        """Verify a state or raise -32602; nothing of an unverified state is ever read."""
        if not isinstance(token, str):
            raise _refused()
        parts = token.split(".")
        if len(parts) != 4 or parts[0] != _VERSION:
            raise _refused()
        _, key_id, body, mac = parts
        key = self.ring.key(key_id)
        if key is None:
            raise _refused()
        expected = hmac.new(key, f"{_VERSION}.{key_id}.{body}".encode(), hashlib.sha256).digest()
        try:
            valid = hmac.compare_digest(expected, _unb64(mac))
            payload = json.loads(_unb64(body)) if valid else None
        except (binascii.Error, ValueError):
            raise _refused() from None
        if not isinstance(payload, dict) or payload.get("b") != binding:
            raise _refused()
        expiry, data, round_ = payload.get("x"), payload.get("d"), payload.get("r")
        if not isinstance(expiry, int) or expiry < now * 1000:
            raise _refused()
        if not isinstance(data, dict) or not isinstance(round_, int):
            raise _refused()
        return Unsealed(data, round_)


def _refused() -> InvalidParams:
    return InvalidParams("requestState failed verification")
