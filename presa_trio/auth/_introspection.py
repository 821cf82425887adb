"""``IntrospectionVerifier``: a ``TokenVerifier`` that asks the authorization server about each
token (OAuth 2.0 Token Introspection, RFC 7662), with httpx, and keeps what it was told.

An active answer is cached under a hash of the token (never the token), for the shorter of
the token's own lifetime (``exp``) and ``cache_ttl``, in a bounded table; an inactive one is
not cached, so a token is refused until the server says otherwise. Concurrent checks of one
token share one request. Every request is bounded by ``timeout``; an endpoint that cannot be
reached, answers 5xx or garbage, or is too slow is a retryable 503 for the client, never a
401 (the token may well be fine) and never a traceback. No discovery, no JWT decoding.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, final

import trio

from .._protocol.tokens import AccessToken
from ..errors import ServiceUnavailable
from ._jwt import _as_tuple, _optional_str, _overlap, _scopes
from ._metadata import check_url

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger("presa_trio.auth")

DEFAULT_TIMEOUT = 5.0
DEFAULT_CACHE_TTL = 60.0
DEFAULT_MAX_ENTRIES = 10_000
DEFAULT_MAX_BYTES = 64 * 1024

ClientFactory = Callable[[], "httpx.AsyncClient"]


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise ImportError(
            "IntrospectionVerifier needs httpx: pip install 'presa_trio[introspection]'"
        ) from None
    return httpx


@dataclass(slots=True)
class _Flight:
    """One introspection request in flight, and what it came to (for those who waited)."""

    done: trio.Event = field(default_factory=trio.Event)
    finished: bool = False
    access: AccessToken | None = None
    failed: bool = False


@final
class IntrospectionVerifier:
    """Verify opaque access tokens at your authorization server's introspection endpoint.

    ``url`` is the endpoint (RFC 7662 §2); it is sent ``token=...`` in a form POST, with
    ``client_id``/``client_secret`` as HTTP Basic (``client_secret_basic``) when given.
    An answer with ``"active": true`` is the token: ``sub``, ``client_id``, ``scope``,
    ``exp``, ``iss`` and ``aud`` read as ``JwtVerifier`` reads them. ``aud`` is required
    (audience binding, RFC 8707); ``audience`` is what one of its values must be, by
    default left to ``BearerAuth`` (the server's ``resource``). ``issuer``, when given, is
    the ``iss`` an answer must carry. Anything else (``"active": false``, an expired
    ``exp``, a missing ``aud``) is no token: 401.

    ``timeout`` bounds each request; ``cache_ttl`` (seconds) bounds how long an active
    answer is kept, never past its ``exp``; at most ``max_entries`` are kept (the least
    recently used go first). ``clock`` gives the time in seconds since the epoch, for
    ``exp`` and the cache; ``http_client`` makes the ``httpx.AsyncClient`` to ask with.
    """

    def __init__(
        self,
        url: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        audience: str | Sequence[str] | None = None,
        issuer: str | Sequence[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cache_ttl: float = DEFAULT_CACHE_TTL,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.time,
        http_client: ClientFactory | None = None,
    ) -> None:
        httpx = _httpx()
        self.url = check_url(url, "introspection url")
        if (client_id is None) != (client_secret is None):
            raise ValueError("give client_id and client_secret together, or neither")
        if timeout <= 0 or cache_ttl < 0 or max_entries < 0:
            raise ValueError("timeout must be positive; cache_ttl and max_entries not negative")
        self._auth: tuple[str, str] | None = None
        if client_id is not None and client_secret is not None:
            self._auth = (client_id, client_secret)
        self.audiences = None if audience is None else _as_tuple(audience)
        self.issuers = None if issuer is None else _as_tuple(issuer)
        self.timeout = timeout
        self.cache_ttl = cache_ttl
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.clock = clock
        self._client: ClientFactory = http_client or (lambda: httpx.AsyncClient(timeout=timeout))
        self._cache: OrderedDict[bytes, tuple[AccessToken, float]] = OrderedDict()
        self._flights: dict[bytes, _Flight] = {}

    async def verify(self, token: str) -> AccessToken | None:
        key = hashlib.sha256(token.encode()).digest()
        cached = self._cached(key)
        if cached is not None:
            await trio.lowlevel.checkpoint()
            return cached
        flight = self._flights.get(key)
        if flight is not None:
            await flight.done.wait()
            if flight.failed:
                raise ServiceUnavailable("Token introspection is unavailable")
            if flight.finished:
                return flight.access
            # the task that asked was cancelled before its answer: ask again
        return await self._ask(key, token)

    def _cached(self, key: bytes) -> AccessToken | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        access, until = entry
        if self.clock() >= until:
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        return access

    def _keep(self, key: bytes, access: AccessToken) -> None:
        until = self.clock() + self.cache_ttl
        if access.expires_at is not None:
            until = min(until, access.expires_at)
        if self.max_entries == 0 or until <= self.clock():
            return
        self._cache[key] = (access, until)
        self._cache.move_to_end(key)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)

    async def _ask(self, key: bytes, token: str) -> AccessToken | None:
        flight = self._flights[key] = _Flight()
        try:
            answer = await self._introspect(token)
            if answer is None:
                flight.failed = True
                raise ServiceUnavailable("Token introspection is unavailable")
            access = self._access(answer)
            if access is not None:
                self._keep(key, access)
            flight.access, flight.finished = access, True
            return access
        finally:
            del self._flights[key]
            flight.done.set()

    async def _introspect(self, token: str) -> dict[str, Any] | None:
        """The endpoint's answer, or None (logged) when there was none to be had in time."""
        answer: dict[str, Any] | None = None
        with trio.move_on_after(self.timeout) as deadline:
            try:
                answer = json.loads(await self._post(token))
            except Exception as exc:  # a network or document fault; cancellation passes
                logger.error("token introspection at %s failed: %r", self.url, exc)
                await trio.lowlevel.checkpoint()
                return None
        if deadline.cancelled_caught:
            logger.error("token introspection at %s took over %s s", self.url, self.timeout)
            return None
        if not isinstance(answer, dict) or not isinstance(answer.get("active"), bool):
            logger.error("token introspection at %s answered no RFC 7662 document", self.url)
            return None
        return answer

    async def _post(self, token: str) -> bytes:
        form = {"token": token, "token_type_hint": "access_token"}
        async with (
            self._client() as client,
            client.stream(
                "POST",
                self.url,
                data=form,
                auth=self._auth,
                headers={"accept": "application/json"},
            ) as response,
        ):
            if response.status_code != 200:
                raise ValueError(f"HTTP {response.status_code}")
            body = bytearray()
            # Read to the end (``timeout`` bounds it) but keep no more than the limit.
            async for chunk in response.aiter_bytes():
                if len(body) <= self.max_bytes:
                    body += chunk
            if len(body) > self.max_bytes:
                raise ValueError(f"the answer is over {self.max_bytes} bytes")
        return bytes(body)

    def _access(self, answer: dict[str, Any]) -> AccessToken | None:
        """An active answer as the token it describes; None for anything else."""
        if answer["active"] is not True:
            return None
        exp = answer.get("exp")
        if exp is not None and (
            not isinstance(exp, int | float) or isinstance(exp, bool) or exp <= self.clock()
        ):
            return None
        audience = _as_tuple(answer.get("aud", ()))
        if not audience or (self.audiences is not None and not _overlap(audience, self.audiences)):
            return None
        issuer = answer.get("iss")
        if self.issuers is not None and issuer not in self.issuers:
            return None
        subject, client_id, scopes = answer.get("sub"), answer.get("client_id"), _scopes(answer)
        if scopes is None or not _optional_str(subject) or not _optional_str(client_id):
            return None
        return AccessToken(
            subject=subject,
            client_id=client_id,
            scopes=scopes,
            expires_at=None if exp is None else float(exp),
            issuer=issuer if isinstance(issuer, str) else None,
            audience=audience,
            claims=answer,
        )
