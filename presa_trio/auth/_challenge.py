"""The two headers of bearer authentication: reading ``Authorization: Bearer`` and writing
``WWW-Authenticate: Bearer`` (RFC 6750 §2.1, §3; RFC 9728 §5.1).

Pure functions over strings. Tokens come from the header only, never from a query string or
a body (spec 2026-07-28 basic/authorization §Token Requirements); what a token is worth is
the verifier's business, not this module's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# RFC 6750 §2.1 b64token.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# What a quoted auth-param value may hold here: printable ASCII but '"' and '\' (the
# RFC 6750 §3 rule for error_description, applied to every value we write).
_QUOTABLE = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]*")


class MalformedCredentials(ValueError):
    """An ``Authorization`` header that is not one well-formed bearer credential."""


def bearer_token(values: Sequence[str]) -> str | None:
    """The token of a request's ``Authorization`` header values.

    None when the request brings no bearer credential at all (no header, or another
    scheme): RFC 6750 §3.1 answers that with a bare challenge. ``MalformedCredentials``
    when it brings one badly: the header repeated, or ``Bearer`` without a proper token.
    """
    if not values:
        return None
    if len(values) > 1:
        raise MalformedCredentials("more than one Authorization header")
    scheme, _, rest = values[0].strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = rest.strip(" ")
    if not _B64TOKEN.fullmatch(token):
        raise MalformedCredentials("the Bearer credential is not a token")
    return token


def check_quotable(value: str, what: str) -> str:
    """``value``, if it can go in a challenge as a quoted string without escapes."""
    if not _QUOTABLE.fullmatch(value):
        raise ValueError(f"{what} {value!r} cannot appear in a WWW-Authenticate header")
    return value


def challenge(
    *,
    error: str | None = None,
    scopes: Iterable[str] = (),
    resource_metadata: str | None = None,
    description: str | None = None,
) -> str:
    """A ``WWW-Authenticate: Bearer`` value. Without ``error`` it is the bare challenge of a
    request that brought no credential; ``scopes`` become one space-separated ``scope``."""
    params: list[tuple[str, str]] = []
    if error is not None:
        params.append(("error", error))
    scope = " ".join(scopes)
    if scope:
        params.append(("scope", scope))
    if resource_metadata is not None:
        params.append(("resource_metadata", resource_metadata))
    if description is not None:
        params.append(("error_description", description))
    if not params:
        return "Bearer"
    return "Bearer " + ", ".join(f'{name}="{check_quotable(v, name)}"' for name, v in params)
