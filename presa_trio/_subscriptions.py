"""The in-process notification bus behind ``subscriptions/listen`` (wire §11).

Each open listen stream is a ``Listener`` holding a bounded trio memory channel; publishing
is non-blocking fan-out to the listeners whose filter matches. A listener that falls too far
behind is closed rather than letting memory grow. One process only: several workers need a
shared bus (see the README).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

# Filter keys the core understands; extensions add their own through a hook.
CORE_FLAGS = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
RESOURCE_SUBSCRIPTIONS = "resourceSubscriptions"


@dataclass(frozen=True, slots=True)
class Event:
    """One notification to fan out: method, params (without the subscription tag), audience."""

    method: str
    params: Mapping[str, Any]
    matches: Callable[[Mapping[str, Any]], bool]


@dataclass(eq=False, slots=True)
class Listener:
    """One open listen stream: its agreed filter and the channel its events arrive on."""

    subscription_id: int | str
    filter: Mapping[str, Any]
    send: trio.MemorySendChannel[Event]
    receive: trio.MemoryReceiveChannel[Event]


class SubscriptionBus:
    """Fan-out of change notifications to every matching open listener."""

    def __init__(self, buffer: int = 64) -> None:
        self._listeners: set[Listener] = set()
        self._buffer = buffer
        self._closed = False

    @property
    def listener_count(self) -> int:
        return len(self._listeners)

    @asynccontextmanager
    async def listen(
        self, subscription_id: int | str, agreed: Mapping[str, Any]
    ) -> AsyncIterator[Listener]:
        """Register a listener for the duration of the block; always unregistered after."""
        send, receive = trio.open_memory_channel[Event](self._buffer)
        listener = Listener(subscription_id, agreed, send, receive)
        if self._closed:
            send.close()
        else:
            self._listeners.add(listener)
        try:
            yield listener
        finally:
            self._listeners.discard(listener)
            send.close()
            receive.close()

    def publish(self, event: Event) -> int:
        """Deliver to matching listeners without blocking; returns how many got it."""
        delivered = 0
        for listener in list(self._listeners):
            if not event.matches(listener.filter):
                continue
            try:
                listener.send.send_nowait(event)
                delivered += 1
            except trio.WouldBlock:  # a stuck consumer: end its stream, keep the rest going
                listener.send.close()
                self._listeners.discard(listener)
            except trio.ClosedResourceError:
                self._listeners.discard(listener)
        return delivered

    def close(self) -> None:
        """End every stream gracefully (server shutdown); later listens end at once."""
        self._closed = True
        for listener in list(self._listeners):
            listener.send.close()
        self._listeners.clear()


def flag_event(method: str, flag: str) -> Event:
    return Event(method, {}, lambda f: f.get(flag) is True)


def resource_updated_event(uri: str) -> Event:
    def matches(agreed: Mapping[str, Any]) -> bool:
        watched = agreed.get(RESOURCE_SUBSCRIPTIONS) or ()
        return any(uri == w or uri.startswith(w.rstrip("/") + "/") for w in watched)

    return Event("notifications/resources/updated", {"uri": uri}, matches)
