"""``JwtVerifier``: a ``TokenVerifier`` for JWT access tokens (RFC 9068), on joserfc.

It checks the signature against a JWK set, given up front or fetched from a JWKS URL (with
httpx, cached, bounded; see ``RemoteKeys``), then ``iss``, ``aud``, ``exp`` (required),
``nbf`` and ``iat`` (with a small leeway), and reads the scopes from ``scope`` or ``scp``.
joserfc is imported when a verifier is made, so the rest of presa_trio works without it
(``pip install 'presa_trio[jwt]'``). No discovery, no introspection.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, final

import trio

from .._protocol.tokens import AccessToken
from . import _jwks
from ._metadata import canonical

if TYPE_CHECKING:
    from joserfc.jwk import KeySet

#: Asymmetric algorithms only by default: a server that verifies holds no signing secret.
#: ``HS256`` (a shared secret as an ``oct`` key) must be asked for by name.
DEFAULT_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
    "ES256", "ES384", "ES512", "Ed25519", "EdDSA",
)  # fmt: skip
DEFAULT_LEEWAY = 30


def _joserfc() -> Any:
    try:
        import joserfc.errors
        import joserfc.jwk
        import joserfc.jws
        import joserfc.jwt
    except ImportError:
        raise ImportError(
            "JwtVerifier needs joserfc: pip install 'presa_trio[jwt]' (or pip install joserfc)"
        ) from None
    return joserfc


@final
class JwtVerifier:
    """Verify JWT access tokens signed by your authorization server.

    ``jwks`` is its JWK Set (``{"keys": [...]}``, as a mapping or JSON text; one JWK alone
    also works): the public keys only are kept. Or give ``jwks_url`` instead: the set is
    fetched when first needed, kept ``jwks_ttl`` seconds, and fetched again early when a
    token names a key it does not hold, at most once per ``jwks_min_refresh`` seconds; a
    fetch takes at most ``jwks_fetch_timeout`` seconds (503 while no set could be had at
    all). ``http_client`` makes the ``httpx.AsyncClient`` to fetch with.

    ``issuer`` is the ``iss`` a token must carry (one issuer URL, or several).
    ``audience`` is the ``aud`` one of whose values must match; by default it is left to
    ``BearerAuth``, which requires the server's ``resource`` there (audience binding is a
    MUST in the spec; a token without ``aud`` is always refused). ``leeway`` (seconds)
    absorbs clock skew for ``exp``/``nbf``/``iat``. The subject is ``sub``, the client
    ``client_id`` (or ``azp``); a token with neither is refused by ``BearerAuth``.
    """

    def __init__(
        self,
        *,
        jwks: Mapping[str, Any] | str | None = None,
        jwks_url: str | None = None,
        issuer: str | Sequence[str],
        audience: str | Sequence[str] | None = None,
        algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
        leeway: int = DEFAULT_LEEWAY,
        clock: Callable[[], float] = time.time,
        jwks_ttl: float = _jwks.DEFAULT_TTL,
        jwks_min_refresh: float = _jwks.DEFAULT_MIN_REFRESH,
        jwks_fetch_timeout: float = _jwks.DEFAULT_FETCH_TIMEOUT,
        http_client: _jwks.ClientFactory | None = None,
    ) -> None:
        joserfc = _joserfc()
        if (jwks is None) == (jwks_url is None):
            raise ValueError("give exactly one of jwks= or jwks_url=")
        self._keys: KeySet | None = None
        self._remote: _jwks.RemoteKeys | None = None
        if jwks is not None:
            self._keys = _public_keys(joserfc, jwks)
        else:
            assert jwks_url is not None
            self._remote = _jwks.RemoteKeys(
                jwks_url,
                partial(_public_keys, joserfc),
                ttl=jwks_ttl,
                fetch_timeout=jwks_fetch_timeout,
                min_refresh=jwks_min_refresh,
                client=http_client,
            )
        self.issuers = (issuer,) if isinstance(issuer, str) else tuple(issuer)
        if not self.issuers:
            raise ValueError("issuer must name at least one issuer")
        self.audiences = None if audience is None else _as_tuple(audience)
        self.algorithms = tuple(algorithms)
        if "none" in self.algorithms:
            raise ValueError("unsigned tokens (alg none) are never accepted")
        self.leeway = leeway
        self.clock = clock

    async def verify(self, token: str) -> AccessToken | None:
        if self._remote is None:
            await trio.lowlevel.checkpoint()
            return self.verify_now(token)
        joserfc = _joserfc()
        try:  # the key id, unverified: only to pick a key (garbage never causes a fetch)
            kid = joserfc.jws.extract_compact(token.encode()).headers().get("kid")
        except (joserfc.errors.JoseError, ValueError, TypeError):
            await trio.lowlevel.checkpoint()
            return None
        keys = await self._remote.keys_for(kid if isinstance(kid, str) else None)
        return self._check(token, keys)

    def verify_now(self, token: str) -> AccessToken | None:
        """``verify`` without the checkpoint, for a verifier given ``jwks``: a signature
        check is a few microseconds of CPU and reads nothing, so it runs on the loop."""
        if self._keys is None:
            raise RuntimeError("verify_now needs static keys (jwks=); await verify() instead")
        return self._check(token, self._keys)

    def _check(self, token: str, keys: KeySet) -> AccessToken | None:
        joserfc = _joserfc()
        try:
            decoded = joserfc.jwt.decode(token, keys, algorithms=self.algorithms)
            claims: dict[str, Any] = decoded.claims
            registry = joserfc.jwt.JWTClaimsRegistry(
                now=int(self.clock()),
                leeway=self.leeway,
                iss={"essential": True, "values": list(self.issuers)},
                exp={"essential": True},
                aud={"essential": True},
            )
            registry.validate(claims)
            expires_at = float(claims["exp"])
        except (joserfc.errors.JoseError, ValueError, TypeError, OverflowError):
            return None  # any fault in the token is the token's: 401, not 500
        audience = _as_tuple(claims["aud"])
        if self.audiences is not None and not _overlap(audience, self.audiences):
            return None
        subject = claims.get("sub")
        client_id = claims.get("client_id", claims.get("azp"))
        scopes = _scopes(claims)
        if scopes is None or not _optional_str(subject) or not _optional_str(client_id):
            return None
        return AccessToken(
            subject=subject,
            client_id=client_id,
            scopes=scopes,
            expires_at=expires_at,
            issuer=claims["iss"],
            audience=audience,
            claims=claims,
        )


def _public_keys(joserfc: Any, jwks: Mapping[str, Any] | str) -> KeySet:
    document = json.loads(jwks) if isinstance(jwks, str) else dict(jwks)
    found = document.get("keys", [document])
    if not isinstance(found, list) or not found:
        raise ValueError("jwks must be a JWK Set with at least one key")
    keys = joserfc.jwk.KeySet.import_key_set({"keys": found})
    public = [key.as_dict(private=False) for key in keys]
    result: KeySet = joserfc.jwk.KeySet.import_key_set({"keys": public})
    return result


def _as_tuple(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value) if isinstance(value, Iterable) else ()


def _overlap(presented: Iterable[str], accepted: Iterable[str]) -> bool:
    wanted = {canonical(a) for a in accepted}
    return any(canonical(p) in wanted for p in presented)


def _optional_str(value: object) -> bool:
    return value is None or (isinstance(value, str) and bool(value))


def _scopes(claims: Mapping[str, Any]) -> frozenset[str] | None:
    """``scope`` (RFC 9068: space-separated) or ``scp`` (a list, or a string); None when
    either is there but shaped otherwise."""
    raw = claims.get("scope", claims.get("scp", ""))
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        return frozenset(raw)
    return None
