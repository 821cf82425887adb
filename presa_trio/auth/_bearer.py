"""``BearerAuth``: an MCP server as an OAuth 2.1 resource server (spec 2026-07-28
basic/authorization §Access Token Usage, §Error Handling; RFC 6750; RFC 9728).

It checks the bearer token of each HTTP request with your ``TokenVerifier`` (bounded in
time), refuses what it must with the right status and ``WWW-Authenticate`` challenge, and
decides whether a token's scopes cover an operation. It issues no tokens and talks to no
authorization server: that is the client's side of the flow. stdio never comes here.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import final

import trio

from .._boundary import protocol_error
from .._protocol.tokens import AccessToken, TokenVerifier, check_scopes
from ..errors import InsufficientScope, InternalError, ServiceUnavailable, Unauthorized
from . import _metadata
from ._challenge import MalformedCredentials, bearer_token, challenge

logger = logging.getLogger("presa_trio.auth")

DEFAULT_VERIFY_TIMEOUT = 10.0
DEFAULT_MAX_TOKEN_BYTES = 16_384


class MalformedAuthorization(Unauthorized):
    """An ``Authorization`` header that is not one bearer token (RFC 6750 §3.1
    ``invalid_request``): HTTP 400, with the challenge all the same."""

    http_status = 400


@final
class BearerAuth:
    """Require a valid bearer token on every HTTP request, and say where to get one.

    ``verifier`` checks a token (``JwtVerifier``, or your own ``TokenVerifier``).
    ``resource`` is this server's canonical URI, the MCP endpoint as clients reach it, any
    mount prefix included (``https://mcp.example.com/api/mcp``): tokens must be issued for
    it, and its Protected Resource Metadata names it together with ``authorization_servers``
    (at least one issuer URL) and ``scopes_supported``. A refusal's challenge points at that
    document, ``resource_metadata``: the path ``metadata_path`` at the root of the host
    (``/.well-known/oauth-protected-resource/api/mcp``), outside the mount, where the host
    serves ``AsgiApp.metadata_app()``. ``required_scopes`` are needed for any request at all
    (403 without them); a tool declares more with ``@server.tool(scopes=[...])``.
    ``scope_hierarchy`` maps a broad scope to the narrower ones it implies (``{"admin":
    ["deploy", "read"]}``), as the spec asks servers to honour. ``verify_timeout`` bounds
    one verification (503 after it); a token over ``max_token_bytes`` is refused unread.
    """

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        resource: str,
        authorization_servers: Sequence[str],
        scopes_supported: Sequence[str] | None = None,
        required_scopes: Sequence[str] = (),
        scope_hierarchy: Mapping[str, Iterable[str]] | None = None,
        resource_name: str | None = None,
        resource_documentation: str | None = None,
        verify_timeout: float = DEFAULT_VERIFY_TIMEOUT,
        max_token_bytes: int = DEFAULT_MAX_TOKEN_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.verifier = verifier
        self.resource = _metadata.check_url(resource, "resource")
        self.authorization_servers = _metadata.check_servers(authorization_servers)
        supported = None if scopes_supported is None else check_scopes(scopes_supported)
        self.scopes_supported = supported
        self.required_scopes = check_scopes(required_scopes, "required scope")
        if "offline_access" in (*(supported or ()), *self.required_scopes):
            # A refresh token is the client's business, not a resource requirement (spec
            # basic/authorization §Refresh Tokens).
            raise ValueError("offline_access is not a scope of a protected resource")
        self._implied = _closure(scope_hierarchy or {})
        if verify_timeout <= 0:
            raise ValueError("verify_timeout must be positive")
        self.verify_timeout = verify_timeout
        self.max_token_bytes = max_token_bytes
        self.clock = clock
        self.resource_metadata = _metadata.metadata_url(self.resource)
        self.metadata_path = _metadata.metadata_path(self.resource)
        self.metadata = _metadata.document(
            self.resource,
            self.authorization_servers,
            scopes_supported=supported,
            resource_name=resource_name,
            resource_documentation=(
                None
                if resource_documentation is None
                else _metadata.check_url(resource_documentation, "resource_documentation")
            ),
        )
        self.metadata_body = json.dumps(self.metadata, separators=(",", ":")).encode()

    def metadata_paths(self, endpoint: str) -> frozenset[str]:
        """The paths (below the app's mount point) that serve ``metadata``."""
        return _metadata.metadata_paths(self.resource, endpoint)

    # ------------------------------------------------------------------ verifying

    async def authenticate(self, authorization: Sequence[str]) -> AccessToken:
        """The verified token of a request whose ``Authorization`` values are these, or the
        refusal to answer: 401 (no valid token), 400 (a malformed header), 403 (the
        ``required_scopes`` are not granted), 500 (the verifier failed) or 503 (it took
        longer than ``verify_timeout``). Cancellation passes through."""
        try:
            token = bearer_token(authorization)
        except MalformedCredentials as exc:
            raise MalformedAuthorization(
                f"Bad request: {exc}",
                challenge(error="invalid_request", resource_metadata=self.resource_metadata),
            ) from None
        if token is None:
            raise Unauthorized(
                "Unauthorized: a bearer token is required",
                challenge(scopes=self.required_scopes, resource_metadata=self.resource_metadata),
            )
        if len(token) > self.max_token_bytes:
            raise self._invalid_token()
        access = await self._verify(token)
        if (
            access is None
            or not access.principal
            or (access.expires_at is not None and access.expires_at <= self.clock())
            or (access.audience is not None and not self._for_this_resource(access.audience))
        ):
            raise self._invalid_token()
        self.require(access, ())
        return access

    async def _verify(self, token: str) -> AccessToken | None:
        access: AccessToken | None = None
        try:
            with trio.move_on_after(self.verify_timeout) as deadline:
                access = await self.verifier.verify(token)
        except BaseException as exc:
            # A verifier's own McpError stands; any other error is logged and answered
            # -32603 without detail (never a 401: the token may well be fine).
            raise protocol_error(exc, "verifying a bearer token", log=logger) from None
        if deadline.cancelled_caught:
            logger.error("token verification took longer than %s s", self.verify_timeout)
            raise ServiceUnavailable("Token verification timed out")
        if access is not None and not isinstance(access, AccessToken):
            logger.error("the token verifier returned %r, not an AccessToken", type(access))
            raise InternalError("Internal error")
        return access

    def _for_this_resource(self, audience: Iterable[str]) -> bool:
        mine = _metadata.canonical(self.resource)
        return any(_metadata.canonical(a) == mine for a in audience)

    def _invalid_token(self) -> Unauthorized:
        return Unauthorized(
            "Unauthorized: the access token is not valid here",
            challenge(
                error="invalid_token",
                scopes=self.required_scopes,
                resource_metadata=self.resource_metadata,
            ),
        )

    # ------------------------------------------------------------------ scopes

    def granted(self, access: AccessToken) -> frozenset[str]:
        """The scopes ``access`` holds, with every scope they imply."""
        found = set(access.scopes)
        for scope in access.scopes:
            found |= self._implied.get(scope, frozenset())
        return frozenset(found)

    def require(self, access: AccessToken, scopes: Iterable[str]) -> None:
        """Raise 403 ``insufficient_scope`` unless ``access`` holds ``scopes`` and the
        ``required_scopes``; the challenge names all of them at once (spec §Scope
        Challenge Handling: one challenge per operation, never one scope at a time)."""
        needed = tuple(dict.fromkeys((*self.required_scopes, *scopes)))
        if not set(needed) - self.granted(access):
            return
        raise insufficient_scope(needed, self.resource_metadata)


def insufficient_scope(needed: Sequence[str], resource_metadata: str | None) -> InsufficientScope:
    return InsufficientScope(
        f"Forbidden: insufficient scope (this operation needs: {' '.join(needed)})",
        challenge(error="insufficient_scope", scopes=needed, resource_metadata=resource_metadata),
        list(needed),
    )


def _closure(hierarchy: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Each scope's implied scopes, followed transitively (``admin`` -> ``write`` ->
    ``read``), so a check is one lookup."""
    direct = {
        broad: frozenset(check_scopes(narrow, "implied scope"))
        for broad, narrow in hierarchy.items()
    }
    check_scopes(direct, "scope")
    closed: dict[str, frozenset[str]] = {}
    for broad in direct:
        seen: set[str] = set()
        todo = list(direct[broad])
        while todo:
            scope = todo.pop()
            if scope not in seen:
                seen.add(scope)
                todo.extend(direct.get(scope, ()))
        closed[broad] = frozenset(seen)
    return closed


@final
@dataclass(frozen=True, slots=True)
class Authorization:
    """How one HTTP request is authorized: its verified ``token`` and the ``bearer`` policy
    that checked it. Both are None on an app that verifies no tokens, where an operation that
    needs scopes is refused (fail closed). stdio requests carry no ``Authorization`` at
    all: there, credentials come from the environment (spec basic/authorization
    §Protocol Requirements) and scopes are not checked.
    """

    token: AccessToken | None = None
    bearer: BearerAuth | None = None

    def require(self, scopes: Iterable[str]) -> None:
        """Raise 403 ``insufficient_scope`` unless this request's token holds ``scopes``."""
        needed = tuple(scopes)
        if not needed:
            return
        if self.bearer is None or self.token is None:
            raise insufficient_scope(tuple(dict.fromkeys(needed)), None)
        self.bearer.require(self.token, needed)
