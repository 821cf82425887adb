"""Middleware: what wraps every admitted request of a server, in both eras and on every
transport, and how a chain of it is run (spec 2026-07-28 basic/index.mdx, requests).

A middleware is ``async def (ctx, call_next) -> result``: it sees the request's ``Context``
(method, params, principal), runs the rest of the chain with ``await call_next(ctx)``, and
sees its result or its error. The dispatcher runs the chain after admission and before the
result is stamped and written for the wire; it does not run it for notifications, for a
session's GET stream or ``DELETE``, nor for requests refused during admission. A server
without middleware never builds a chain.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from ..errors import InternalError
from .context import Context

logger = logging.getLogger("presa_trio")

#: The rest of the chain: the next middleware, or the method itself.
Next = Callable[[Context], Awaitable[dict[str, Any]]]


class Middleware(Protocol):
    """``async def middleware(ctx, call_next)``: run the rest of the chain with
    ``await call_next(ctx)`` and return its result (or another); raise an ``McpError`` to
    answer that error instead."""

    async def __call__(self, ctx: Context, call_next: Next, /) -> dict[str, Any]: ...


def _link(middleware: Middleware, call_next: Next) -> Next:
    async def call(ctx: Context) -> dict[str, Any]:
        return await middleware(ctx, call_next)

    return call


async def run_chain(
    middleware: Sequence[Middleware], ctx: Context, innermost: Next
) -> dict[str, Any]:
    """``innermost(ctx)`` run through every middleware, the first added the outermost.

    What comes out must be a result object: a middleware that returns anything else (it
    forgot its ``return``, say) is a server fault, logged and answered -32603."""
    call = innermost
    for outer in reversed(middleware):
        call = _link(outer, call)
    result = await call(ctx)
    if not isinstance(result, dict):
        logger.error(
            "the middleware of %s returned %s, not a result object", ctx.method, type(result)
        )
        raise InternalError("Internal error")
    return result
