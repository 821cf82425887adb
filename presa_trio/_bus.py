"""The in-process notification bus behind ``subscriptions/listen`` (wire §11).

Each open listen stream is a ``Listener`` holding a bounded trio memory channel; publishing
is non-blocking fan-out to the listeners whose filter matches. Events that say only "this
changed" (a list changed, a resource was updated) coalesce: while one is still waiting to be
read, an identical one adds nothing, so a burst of changes is one notification, never an
overflow. A listener that still falls too far behind is cut off (marked ``overflowed``, so
its stream can say events were lost) rather than letting memory grow. One bus per run; it
knows nothing of other processes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, final

import trio

from .errors import CapacityExceeded

# Filter keys the core understands; extensions add their own through a hook.
CORE_FLAGS = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
RESOURCE_SUBSCRIPTIONS = "resourceSubscriptions"


@dataclass(frozen=True, slots=True)
class BusEvent:
    """One notification to fan out, as plain data (so it can cross processes, too).

    ``key`` is the listen-filter key that selects it. With no ``value`` the filter's flag
    must be true (``toolsListChanged: true``); with one, an entry of the filter's list must
    cover it: equal, or for ``resourceSubscriptions`` a parent URI of it.
    """

    method: str
    params: Mapping[str, Any]
    key: str
    value: str | None = None

    @property
    def coalesce(self) -> str | None:
        """Equal for events that say the same thing twice; None for events that carry state
        of their own (an extension's), which are never merged."""
        if self.value is None:
            return self.method
        if self.key == RESOURCE_SUBSCRIPTIONS:
            return f"{self.method} {self.value}"
        return None

    def matches(self, agreed: Mapping[str, Any]) -> bool:
        if self.value is None:
            return agreed.get(self.key) is True
        entries = agreed.get(self.key)
        if not isinstance(entries, list | tuple):
            return False
        if self.key == RESOURCE_SUBSCRIPTIONS:
            return any(_covers(entry, self.value) for entry in entries)
        return self.value in entries


def _covers(watched: object, uri: str) -> bool:
    return isinstance(watched, str) and (
        uri == watched or uri.startswith(watched.rstrip("/") + "/")
    )


@dataclass(eq=False, slots=True)
class Listener:
    """One open listen stream: its agreed filter and the channel its events arrive on.

    ``overflowed`` is set when the bus cut this listener off because it fell behind: its
    channel then ends early, and the stream must not pretend that was a clean end.
    """

    subscription_id: int | str
    filter: Mapping[str, Any]
    send: trio.MemorySendChannel[BusEvent]
    receive_channel: trio.MemoryReceiveChannel[BusEvent]
    overflowed: bool = False
    waiting: set[str] = field(default_factory=set)  # coalescing keys sent, not yet read

    async def receive(self) -> BusEvent:
        """The next event (``trio.EndOfChannel`` when the bus ended this stream)."""
        event = await self.receive_channel.receive()
        if event.coalesce is not None:
            self.waiting.discard(event.coalesce)
        return event


@final
class SubscriptionBus:
    """Fan-out of change notifications to every matching open listener."""

    def __init__(self, buffer: int = 256, max_listeners: int | None = 1_000) -> None:
        self._listeners: set[Listener] = set()
        self._buffer = buffer
        self._max_listeners = max_listeners
        self._closed = False

    @property
    def listener_count(self) -> int:
        return len(self._listeners)

    @asynccontextmanager
    async def listen(
        self, subscription_id: int | str, agreed: Mapping[str, Any]
    ) -> AsyncIterator[Listener]:
        """Register a listener for the duration of the block; always unregistered after.

        Raises ``CapacityExceeded`` when ``max_listeners`` streams are open already.
        """
        if self._max_listeners is not None and len(self._listeners) >= self._max_listeners:
            raise CapacityExceeded("max_listen_streams", "Too many open listen streams")
        send, receive = trio.open_memory_channel[BusEvent](self._buffer)
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

    def publish(self, event: BusEvent) -> int:
        """Deliver to matching listeners without blocking; returns how many got it."""
        delivered = 0
        coalesce = event.coalesce
        for listener in list(self._listeners):
            if not event.matches(listener.filter):
                continue
            if coalesce is not None and coalesce in listener.waiting:
                delivered += 1  # the same news is already on its way to this listener
                continue
            try:
                listener.send.send_nowait(event)
                delivered += 1
                if coalesce is not None:
                    listener.waiting.add(coalesce)
            except trio.WouldBlock:  # a stuck consumer: end its stream, keep the rest going
                listener.overflowed = True
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


def flag_event(method: str, flag: str) -> BusEvent:
    return BusEvent(method, {}, flag)


def resource_updated_event(uri: str) -> BusEvent:
    return BusEvent("notifications/resources/updated", {"uri": uri}, RESOURCE_SUBSCRIPTIONS, uri)
