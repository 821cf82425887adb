"""``RemoteKeys``: an authorization server's signing keys, fetched from its JWKS URL with
httpx, cached, and refreshed when a token names a key not yet held (key rotation).

Every wait is bounded: one fetch at a time, each within ``fetch_timeout`` and
``max_bytes``; and however many tokens name unknown keys, a fetch is tried at most once per
``min_refresh`` seconds, so made-up key ids cannot turn this server into a flood against
the authorization server. It verifies nothing itself (``JwtVerifier`` does).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

import trio

from ..errors import ServiceUnavailable
from ._metadata import check_url

if TYPE_CHECKING:
    import httpx
    from joserfc.jwk import KeySet

logger = logging.getLogger("presa_trio.auth")

DEFAULT_TTL = 300.0
DEFAULT_FETCH_TIMEOUT = 5.0
DEFAULT_MIN_REFRESH = 10.0
DEFAULT_MAX_BYTES = 256 * 1024

ClientFactory = Callable[[], "httpx.AsyncClient"]
PublicKeys = Callable[[Any], "KeySet"]


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise ImportError(
            "JwtVerifier(jwks_url=...) needs httpx: pip install 'presa_trio[jwt]'"
        ) from None
    return httpx


@final
class RemoteKeys:
    """The key set at ``url``; ``public_keys`` turns a fetched JWK Set document into keys
    (raising ``ValueError`` or a joserfc error when it is not one)."""

    def __init__(
        self,
        url: str,
        public_keys: PublicKeys,
        *,
        ttl: float = DEFAULT_TTL,
        fetch_timeout: float = DEFAULT_FETCH_TIMEOUT,
        min_refresh: float = DEFAULT_MIN_REFRESH,
        max_bytes: int = DEFAULT_MAX_BYTES,
        client: ClientFactory | None = None,
    ) -> None:
        httpx = _httpx()
        self.url = check_url(url, "jwks_url")
        self._public_keys = public_keys
        self.ttl = ttl
        self.fetch_timeout = fetch_timeout
        self.min_refresh = min_refresh
        self.max_bytes = max_bytes
        self._client: ClientFactory = client or (lambda: httpx.AsyncClient(timeout=fetch_timeout))
        self._keys: KeySet | None = None
        self._loaded_at = -float("inf")  # trio time of the last good fetch
        self._tried_at = -float("inf")  # trio time of the last attempt, good or not
        self._lock = trio.Lock()

    def _usable(self, kid: str | None) -> bool:
        if self._keys is None or trio.current_time() - self._loaded_at >= self.ttl:
            return False
        return kid is None or any(key.kid == kid for key in self._keys)

    async def keys_for(self, kid: str | None) -> KeySet:
        """Keys to verify a token whose header names ``kid``: the cached set while it is
        fresh and holds that key, else what a refresh brings (when one is due). Raises a
        retryable ``ServiceUnavailable`` while no key set could be fetched at all."""
        if self._usable(kid):
            await trio.lowlevel.checkpoint()
            assert self._keys is not None
            return self._keys
        async with self._lock:  # the tasks that queue here share the one fetch
            if not self._usable(kid) and trio.current_time() - self._tried_at >= self.min_refresh:
                await self._refresh()
        if self._keys is None:
            raise ServiceUnavailable("The authorization server's signing keys are unavailable")
        return self._keys

    async def _refresh(self) -> None:
        self._tried_at = trio.current_time()
        fetched: KeySet | None = None
        with trio.move_on_after(self.fetch_timeout) as deadline:
            fetched = await self._fetched()
        if deadline.cancelled_caught:
            logger.error("fetching the JWKS at %s took over %s s", self.url, self.fetch_timeout)
        if fetched is not None:
            self._keys, self._loaded_at = fetched, trio.current_time()
        # A failed refresh keeps the keys held so far: an outage of the authorization
        # server does not log everyone out (its old keys still verify its old tokens).

    async def _fetched(self) -> KeySet | None:
        """The key set at ``url``, or None (logged) when it could not be had."""
        try:
            return self._public_keys(json.loads(await self._fetch()))
        except Exception as exc:  # a network or document fault; cancellation passes
            logger.error("fetching the JWKS at %s failed: %r", self.url, exc)
            await trio.lowlevel.checkpoint()
            return None

    async def _fetch(self) -> bytes:
        async with (
            self._client() as client,
            client.stream("GET", self.url, headers={"accept": "application/json"}) as response,
        ):
            if response.status_code != 200:
                raise ValueError(f"HTTP {response.status_code}")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise ValueError(f"the document is over {self.max_bytes} bytes")
            body = bytearray()
            # Read to the end (``fetch_timeout`` bounds it) but keep no more than the limit:
            # leaving httpx's stream early leaves its generators for the collector.
            async for chunk in response.aiter_bytes():
                if len(body) <= self.max_bytes:
                    body += chunk
            if len(body) > self.max_bytes:
                raise ValueError(f"the document is over {self.max_bytes} bytes")
        return bytes(body)
