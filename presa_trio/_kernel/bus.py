"""The in-process notification bus behind ``subscriptions/listen`` (wire §11).

Each open listen stream is a ``Listener`` holding a bounded trio memory channel; publishing
is non-blocking fan-out to the listeners whose filter matches, found through an index of the
filters (``_Audiences``) rather than by asking every open stream: an event costs what it
delivers, however many streams are open and however long their lists. Events that say only "this
changed" (a list changed, a resource was updated) coalesce: while one is still waiting to be
read, an identical one adds nothing, so a burst of changes is one notification, never an
overflow. A listener that still falls too far behind is cut off (marked ``overflowed``, so
its stream can say events were lost) rather than letting memory grow. The open streams are
bounded in all and per principal, so one principal cannot take every stream of the worker.
One bus per run; it knows nothing of other processes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, final

import trio

from .shares import Shares

# Filter keys the core understands; extensions add their own through a hook.
CORE_FLAGS = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
RESOURCE_SUBSCRIPTIONS = "resourceSubscriptions"
#: A filter flag that hears the updates of every resource: the server's own (an older-era
#: session's GET stream, which decides by its subscriptions); no listen filter can ask it.
EVERY_RESOURCE = "presa/everyResource"
#: The filter key a resumed stream follows its stream by (its value the stream's id): the
#: server's own, no listen filter can ask it.
STREAM_ADVANCED = "presa/streamAdvanced"


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
        if self.key in (RESOURCE_SUBSCRIPTIONS, STREAM_ADVANCED):
            return f"{self.method} {self.value}"
        return None

    def matches(self, agreed: Mapping[str, Any]) -> bool:
        if self.key == RESOURCE_SUBSCRIPTIONS and agreed.get(EVERY_RESOURCE) is True:
            return True
        if self.value is None:
            return agreed.get(self.key) is True
        entries = agreed.get(self.key)
        if not isinstance(entries, list | tuple):
            return False
        if self.key == RESOURCE_SUBSCRIPTIONS:
            return any(covers(entry, self.value) for entry in entries)
        return self.value in entries


def covers(watched: object, uri: str) -> bool:
    """Whether a watched URI covers ``uri``: equal, or a parent of it."""
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


def _parents(uri: str) -> Iterator[str]:
    """What a watched URI, its trailing slashes stripped, is when it covers ``uri`` as a
    parent: ``uri`` cut before each of its slashes."""
    at = uri.find("/")
    while at != -1:
        yield uri[:at]
        at = uri.find("/", at + 1)


# Where ``_Audiences`` keeps a listener: (filter key, value, whether as a parent URI).
_Place = tuple[str, str | None, bool]


@final
class _Audiences:
    """The open listeners, indexed by what their filters ask for: ``BusEvent.matches``,
    turned around. A flag is kept under ``(key, None)``, an entry of a list under
    ``(key, entry)``, and a watched URI also as a parent, without its trailing slashes,
    where each parent of an updated resource's URI finds it. A listener's filter is the
    one agreed when its stream opened, and does not change while it is indexed."""

    def __init__(self) -> None:
        self._index: dict[_Place, set[Listener]] = {}

    def __len__(self) -> int:
        """Places held: none once every listener is removed."""
        return len(self._index)

    def add(self, listener: Listener) -> None:
        for place in _places(listener.filter):
            self._index.setdefault(place, set()).add(listener)

    def remove(self, listener: Listener) -> None:
        for place in _places(listener.filter):
            listeners = self._index.get(place)
            if listeners is not None:
                listeners.discard(listener)
                if not listeners:
                    del self._index[place]

    def of(self, event: BusEvent) -> set[Listener]:
        """The listeners whose filter ``event`` matches (a new set, safe to change)."""
        found = set(self._index.get((event.key, event.value, False), ()))
        if event.key == RESOURCE_SUBSCRIPTIONS:
            found.update(self._index.get((EVERY_RESOURCE, None, False), ()))
        if event.key == RESOURCE_SUBSCRIPTIONS and event.value is not None:
            for parent in _parents(event.value):
                found.update(self._index.get((RESOURCE_SUBSCRIPTIONS, parent, True), ()))
        return found


def _places(agreed: Mapping[str, Any]) -> Iterator[_Place]:
    for key, value in agreed.items():
        if value is True:
            yield key, None, False
        elif isinstance(value, list | tuple):
            for entry in value:
                if isinstance(entry, str):  # an event's value is a string: others match none
                    yield key, entry, False
                    if key == RESOURCE_SUBSCRIPTIONS:
                        yield key, entry.rstrip("/"), True


@final
class SubscriptionBus:
    """Fan-out of change notifications to every matching open listener."""

    def __init__(
        self,
        buffer: int = 256,
        max_listeners: int | None = 1_000,
        max_listeners_per_principal: int | None = None,
    ) -> None:
        self._listeners: set[Listener] = set()
        self._audiences = _Audiences()
        self._buffer = buffer
        # Streams open (from admission to the end of their block), in all and per principal.
        self.streams = Shares(
            max_listeners,
            max_listeners_per_principal,
            "max_listen_streams",
            "Too many open listen streams",
        )
        self._closed = False

    @property
    def listener_count(self) -> int:
        return len(self._listeners)

    @asynccontextmanager
    async def listen(
        self, subscription_id: int | str, agreed: Mapping[str, Any], principal: str = ""
    ) -> AsyncIterator[Listener]:
        """Register a listener for the duration of the block; always unregistered after.

        Raises ``CapacityExceeded`` naming the bound when ``max_listeners`` streams are open
        already (``max_listen_streams``), or ``principal`` holds its share of them
        (``max_listen_streams_per_principal``). The stream holds its place until the block
        ends.
        """
        self.streams.take(principal)
        try:
            send, receive = trio.open_memory_channel[BusEvent](self._buffer)
            listener = Listener(subscription_id, agreed, send, receive)
            if self._closed:
                send.close()
            else:
                self._listeners.add(listener)
                self._audiences.add(listener)
            try:
                yield listener
            finally:
                self._drop(listener)
                send.close()
                receive.close()
        finally:
            self.streams.give_back(principal)

    def _drop(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)
            self._audiences.remove(listener)

    def publish(self, event: BusEvent) -> int:
        """Deliver to matching listeners without blocking; returns how many got it."""
        delivered = 0
        coalesce = event.coalesce
        for listener in self._audiences.of(event):
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
                self._drop(listener)
            except trio.ClosedResourceError:
                self._drop(listener)
        return delivered

    def close(self) -> None:
        """End every stream gracefully (server shutdown); later listens end at once."""
        self._closed = True
        for listener in list(self._listeners):
            listener.send.close()
            self._drop(listener)


def flag_event(method: str, flag: str) -> BusEvent:
    return BusEvent(method, {}, flag)


def resource_updated_event(uri: str) -> BusEvent:
    return BusEvent("notifications/resources/updated", {"uri": uri}, RESOURCE_SUBSCRIPTIONS, uri)
