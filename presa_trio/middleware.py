"""Middleware: wrap every request a server answers, and three you can use as they are.

A middleware is ``async def middleware(ctx, call_next)``; ``server.add_middleware(it)``
puts it around every request of both eras, over HTTP and stdio, the first added the
outermost. ``RequestLog`` logs one line per request with its duration, ``RateLimit`` refuses
a principal's requests past a rate with the retryable -32603 (HTTP 503), ``ErrorReporter``
hands unexpected exceptions to a callback of yours. The middleware guide says what a chain
sees of notifications, tasks and input rounds, and when to write an ``Extension`` instead.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, final

import trio

from ._boundary import partition, single
from ._kernel.context import Context
from ._kernel.middleware import Middleware as Middleware
from ._kernel.middleware import Next as Next
from .errors import CapacityExceeded, McpError

__all__ = ["ErrorReporter", "Middleware", "Next", "RateLimit", "RequestLog"]

logger = logging.getLogger("presa_trio")


def _outcome(exc: BaseException) -> str:
    """How a request that raised ``exc`` ends, in a word or two."""
    others, errors = partition(exc)
    if errors is None or others is not None:
        return "cancelled"
    found = single(errors)
    if isinstance(found, McpError):
        return f"error {found.code}"
    return f"crashed ({type(found).__name__}), answered -32603"


@final
class RequestLog:
    """One log line per request: its method, the tool, prompt or URI it names, how it ended
    and how long it took, on trio's clock: ``tools/call forecast: complete, 1.2 ms``.

    It ends ``complete``, ``input_required`` (an input round), ``tool error`` (a tool's
    ``isError`` result), ``error -32602`` (an ``McpError``'s code), ``crashed (KeyError),
    answered -32603`` or ``cancelled``. Records go to ``logger`` (a name or a
    ``logging.Logger``; ``presa_trio.middleware.requests`` by default) at ``level``, with
    ``mcp_outcome`` and ``duration_ms`` as record attributes for structured handlers. Add it
    first to time every other middleware too.
    """

    def __init__(
        self,
        logger: logging.Logger | str = "presa_trio.middleware.requests",
        level: int = logging.INFO,
    ) -> None:
        self._logger = logging.getLogger(logger) if isinstance(logger, str) else logger
        self._level = level

    async def __call__(self, ctx: Context, call_next: Next) -> dict[str, Any]:
        started = trio.current_time()
        outcome = "cancelled"
        try:
            result = await call_next(ctx)
            outcome = str(result.get("resultType", "complete"))
            if outcome == "complete" and result.get("isError") is True:
                outcome = "tool error"
            return result
        except BaseException as exc:
            outcome = _outcome(exc)
            raise
        finally:
            milliseconds = (trio.current_time() - started) * 1000
            named = ctx.params.get("name", ctx.params.get("uri"))
            what = ctx.method if not isinstance(named, str) else f"{ctx.method} {named}"
            self._logger.log(
                self._level,
                "%s: %s, %.1f ms",
                what,
                outcome,
                milliseconds,
                extra={"mcp_outcome": outcome, "duration_ms": milliseconds},
            )


@final
class RateLimit:
    """At most ``per_second`` requests a second for each principal (``ctx.principal``), in
    bursts of at most ``burst`` (default: ``per_second``, rounded up): a token bucket on
    trio's clock. A request past it is refused with ``CapacityExceeded``, -32603 with
    ``data: {"retryable": true, "limit": "requests_per_second"}``, HTTP 503 (on an older-era
    session, in a 200 as its errors are); another principal is not held up.

    ``methods`` limits only those (``{"tools/call"}``, say; None: every request). Each
    worker counts on its own. At most ``max_principals`` are remembered: past that, the one
    seen least recently is forgotten, and starts again with a full bucket. Without a
    ``principal`` function or auth every request is the anonymous principal's, and the
    limit is the server's as a whole.
    """

    def __init__(
        self,
        per_second: float,
        burst: int | None = None,
        *,
        methods: Iterable[str] | None = None,
        max_principals: int = 10_000,
    ) -> None:
        if not (per_second > 0 and math.isfinite(per_second)):
            raise ValueError("per_second must be a positive number")
        if burst is None:
            burst = max(1, math.ceil(per_second))
        if burst < 1:
            raise ValueError("burst must be at least 1")
        if max_principals < 1:
            raise ValueError("max_principals must be at least 1")
        self.per_second = per_second
        self.burst = burst
        self.methods = None if methods is None else frozenset(methods)
        self.max_principals = max_principals
        # principal -> (tokens left, when counted), the least recently seen first
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    async def __call__(self, ctx: Context, call_next: Next) -> dict[str, Any]:
        if self.methods is None or ctx.method in self.methods:
            self.take(ctx.principal, trio.current_time())
        return await call_next(ctx)

    def take(self, principal: str, now: float) -> None:
        """Count one request of ``principal`` at ``now``; ``CapacityExceeded`` past the rate."""
        tokens, then = self._buckets.pop(principal, (float(self.burst), now))
        # never less for time running backwards: another run's clock starts elsewhere
        tokens = min(float(self.burst), tokens + max(0.0, now - then) * self.per_second)
        allowed = tokens >= 1
        self._buckets[principal] = (tokens - 1 if allowed else tokens, now)
        if len(self._buckets) > self.max_principals:
            self._buckets.popitem(last=False)
        if not allowed:
            raise CapacityExceeded(
                "requests_per_second", "Too many requests: rate limit exceeded, retry later"
            )

    @property
    def principals(self) -> int:
        """How many principals are remembered now (at most ``max_principals``)."""
        return len(self._buckets)


@final
class ErrorReporter:
    """Hands each unexpected exception of a request to ``callback(ctx, exception)`` (an
    error tracker's capture function, say), then lets it go on to be answered -32603 as
    usual. An ``McpError`` is an answer, not a fault: it is not reported; nor is
    cancellation, which always goes on untouched. The callback is called synchronously: hand
    slow work to ``ctx.start_background``. If it raises, that is logged and the request is
    answered as it would have been.

    Work that outlives its request (a task's run) reports its failure as the task's result,
    not here.
    """

    def __init__(self, callback: Callable[[Context, BaseException], object]) -> None:
        self._callback = callback

    async def __call__(self, ctx: Context, call_next: Next) -> dict[str, Any]:
        try:
            return await call_next(ctx)
        except BaseException as exc:
            _, errors = partition(exc)
            if errors is not None:
                found = single(errors)
                if not isinstance(found, McpError):
                    self._report(ctx, found)
            raise

    def _report(self, ctx: Context, error: BaseException) -> None:
        try:
            self._callback(ctx, error)
        except Exception:
            logger.exception("the ErrorReporter callback failed on a %s error", ctx.method)
