"""``AccessToken``, what a verified bearer token says, ``TokenVerifier``, who says it, and what
a scope name may be.

Values only: no I/O, no trio. The kernel hands a token to handlers (``ctx.access_token``)
without knowing how it was checked; checking one (signature, issuer, audience, expiry) is a
verifier's job, and what a request may then do with it is ``presa_trio.auth``'s (spec
2026-07-28 basic/authorization §Token Handling).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, final

# RFC 6749 §3.3 scope-token (no space, quote or backslash).
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


@final
@dataclass(frozen=True, slots=True)
class AccessToken:
    """A verified access token: who it stands for and what it allows.

    ``subject`` is the resource owner (a JWT's ``sub``), ``client_id`` the OAuth client it
    was issued to; at least one must be known, since the principal is made of them.
    ``scopes`` are the granted scopes, ``expires_at`` the expiry in seconds since the epoch
    (None: the verifier vouches it has none). ``audience``, when the verifier reports it,
    must name this server's ``resource`` (``BearerAuth`` refuses the token otherwise); a
    verifier that leaves it None has checked the audience itself, as the spec requires.
    ``claims`` keeps whatever else the token said (a JWT's payload, an introspection answer).
    """

    subject: str | None = None
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    issuer: str | None = None
    audience: tuple[str, ...] | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)

    @property
    def principal(self) -> str:
        """Who is asking, for the server's default ``principal``: the subject, else the
        client (``client:ID``, so that it can never pass for a subject of the same name)."""
        if self.subject:
            return self.subject
        return f"client:{self.client_id}" if self.client_id else ""


class TokenVerifier(Protocol):
    """Checks a bearer token: its signature or its introspection, issuer, audience, expiry.

    Return the ``AccessToken`` it stands for, or None when it is not valid here (the client
    gets 401 ``invalid_token``). Raise only for your own failure (an introspection endpoint
    that is down): that is a 500 for the client, never a 401, and the traceback stays in
    the server's log. Every wait inside must be bounded; ``BearerAuth`` bounds the call.
    """

    async def verify(self, token: str) -> AccessToken | None: ...


def check_scopes(scopes: Iterable[str], what: str = "scope") -> tuple[str, ...]:
    """``scopes`` as a tuple, each checked to be an RFC 6749 scope token (ValueError if not)."""
    if isinstance(scopes, str):
        raise ValueError(f"{what}s must be a list of scope names, not one string")
    found = tuple(scopes)
    for scope in found:
        if not isinstance(scope, str) or not _SCOPE_TOKEN.fullmatch(scope):
            raise ValueError(f"{what} {scope!r} is not a scope token (RFC 6749 §3.3)")
    return found
