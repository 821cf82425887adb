"""What the kernel asks of a request's authorization: the verified token, if any, and whether
it holds some scopes.

A protocol of the kernel's own, so that it never loads ``presa_trio.auth``: the HTTP edge
hands in ``presa_trio.auth``'s ``Authorization`` (or anything shaped like it), stdio hands in
none. How a token is verified, and how a refusal is worded, is not the kernel's business.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from .._protocol.tokens import AccessToken


class Authorization(Protocol):
    """One request's authorization, as the kernel sees it."""

    @property
    def token(self) -> AccessToken | None:
        """The verified token the request brought (None: none was verified)."""

    def require(self, scopes: Iterable[str]) -> None:
        """Raise an ``McpError`` (403) unless the request's token holds ``scopes``."""
