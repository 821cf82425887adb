"""``subscriptions/listen``: the acknowledgement, then matching change notifications, then a
final result (wire §11; spec basic/patterns/subscriptions.mdx).

The stream holds one listener on the run's bus, and one place in its principal's share of
the streams, for as long as the client keeps it open. It ends with the graceful result when
the run drains, and with an error when the bus cut the listener off for falling behind, so a
client can tell lost events from a clean end.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Any

import trio

from .._protocol import dialect
from .._protocol.jsonrpc import notification_message
from ..errors import InternalError
from .bus import CORE_FLAGS, RESOURCE_SUBSCRIPTIONS, Listener
from .context import Context
from .settings import Served

logger = logging.getLogger("presa_trio")

KEEPALIVE_SECONDS = 15.0
_BACKING = dict(zip(CORE_FLAGS, ("tools", "prompts", "resources"), strict=True))


async def agreed_filter(
    served: Served, ctx: Context, requested: Mapping[str, Any]
) -> dict[str, Any]:
    """The part of a listen filter this server honours (wire §11.2)."""
    await trio.lowlevel.checkpoint()
    caps = served.capabilities()
    agreed: dict[str, Any] = {}
    for flag in CORE_FLAGS:
        if requested.get(flag) is True and _BACKING[flag] in caps:
            agreed[flag] = True
    uris = requested.get(RESOURCE_SUBSCRIPTIONS)
    if uris and "resources" in caps:
        agreed[RESOURCE_SUBSCRIPTIONS] = list(dict.fromkeys(uris))
    for extension in served.extensions:
        keys = extension.filter_keys()
        if keys & requested.keys():
            agreed.update(await extension.accept_filter(ctx, requested))
    return agreed


async def listen(served: Served, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    """Hold one listen stream: the acknowledgement first, then matching notifications."""
    agreed = await agreed_filter(served, ctx, params["notifications"])
    tag = {dialect.META_SUBSCRIPTION_ID: ctx.request_id}
    # While a stream is open, the other workers' events reach this one promptly.
    with ctx.runtime.backend.attention():
        async with ctx.runtime.bus.listen(ctx.request_id, agreed, ctx.principal) as listener:
            with trio.move_on_at(_token_deadline(ctx)):
                await _relay(ctx, listener, tag, agreed)
            if listener.overflowed:
                logger.warning("listen stream %r fell behind and was cut off", ctx.request_id)
                raise InternalError(
                    "Listen stream fell behind; notifications were lost", {"retryable": True}
                )
    return {"_meta": dict(tag)}


async def _relay(
    ctx: Context, listener: Listener, tag: dict[str, Any], agreed: dict[str, Any]
) -> None:
    """Acknowledge the stream, then pass the listener's events on, with a keepalive after
    each quiet spell, until the bus ends the stream (drained, or cut off)."""
    ack = {"_meta": tag, "notifications": agreed}
    await ctx.notify(notification_message("notifications/subscriptions/acknowledged", ack))
    try:
        while True:
            with trio.move_on_after(KEEPALIVE_SECONDS) as quiet:
                event = await listener.receive()
            if quiet.cancelled_caught:
                await ctx.keepalive()
                continue
            params = {**event.params, "_meta": tag}
            await ctx.notify(notification_message(event.method, params))
    except trio.EndOfChannel:
        pass


def _token_deadline(ctx: Context) -> float:
    """When the stream's access token expires, on trio's clock (never, without one): a
    stream must not outlive the authorization it was opened with."""
    token = ctx.access_token
    if token is None or token.expires_at is None:
        return math.inf
    return trio.current_time() + max(0.0, token.expires_at - time.time())
