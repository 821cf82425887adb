"""The listen bus on its own: bounded fan-out, cutting off a stuck listener, filter matching."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from presa_trio._kernel.bus import (
    BusEvent,
    Listener,
    SubscriptionBus,
    flag_event,
    resource_updated_event,
)

TOOLS = {"toolsListChanged": True}
TASK = {"taskIds": ["t1"]}


def tools_changed(n: int = 0) -> BusEvent:
    return BusEvent("notifications/tools/list_changed", {"n": n}, "toolsListChanged")


def task_changed(n: int) -> BusEvent:
    """An event with state of its own: never coalesced, so each one takes a buffer slot."""
    return BusEvent("notifications/tasks", {"n": n}, "taskIds", "t1")


async def test_a_listener_that_does_not_read_is_cut_off_after_its_buffer() -> None:
    bus = SubscriptionBus(buffer=4)
    async with bus.listen("stuck", TASK) as stuck:
        assert bus.listener_count == 1
        delivered = [bus.publish(task_changed(n)) for n in range(10)]
        assert delivered == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
        assert stuck.overflowed
        assert bus.listener_count == 0
        got = [(await stuck.receive()).params["n"] for _ in range(4)]
        assert got == [0, 1, 2, 3]  # the first four, in order; the rest were never queued
        with pytest.raises(trio.EndOfChannel):
            await stuck.receive()
    assert bus.listener_count == 0


async def test_a_listener_that_reads_keeps_up_beside_a_stuck_one() -> None:
    bus = SubscriptionBus(buffer=4)
    async with bus.listen("stuck", TASK) as stuck, bus.listen("reader", TASK) as reader:
        delivered = []
        got = []
        for n in range(10):
            delivered.append(bus.publish(task_changed(n)))
            got.append((await reader.receive()).params["n"])
        assert delivered == [2, 2, 2, 2, 1, 1, 1, 1, 1, 1]
        assert got == list(range(10))
        assert stuck.overflowed and not reader.overflowed
        assert bus.listener_count == 1
    assert bus.listener_count == 0


async def test_a_burst_of_the_same_news_coalesces_and_never_overflows() -> None:
    bus = SubscriptionBus(buffer=2)
    async with (
        bus.listen("tools", TOOLS) as tools,
        bus.listen("docs", {"resourceSubscriptions": ["r://a"]}) as docs,
    ):
        assert [
            bus.publish(flag_event("notifications/tools/list_changed", "toolsListChanged"))
            for _ in range(100)
        ] == [1] * 100
        for uri in ("r://a/1", "r://a/2", "r://a/1", "r://a/2", "r://a/1"):
            assert bus.publish(resource_updated_event(uri)) == 1
        assert not tools.overflowed and not docs.overflowed
        assert (await tools.receive()).method == "notifications/tools/list_changed"
        assert [(await docs.receive()).params["uri"] for _ in range(2)] == ["r://a/1", "r://a/2"]
        # Once read, the same news is news again.
        bus.publish(flag_event("notifications/tools/list_changed", "toolsListChanged"))
        assert (await tools.receive()).method == "notifications/tools/list_changed"
        bus.close()
        with pytest.raises(trio.EndOfChannel):
            await tools.receive()


async def test_only_matching_listeners_fill_up() -> None:
    bus = SubscriptionBus(buffer=1)
    async with bus.listen(1, {"promptsListChanged": True}) as other:
        for n in range(5):
            assert bus.publish(tools_changed(n)) == 0
        assert not other.overflowed and bus.listener_count == 1


async def test_close_ends_streams_gracefully_and_later_listens_at_once() -> None:
    bus = SubscriptionBus(buffer=4)
    async with bus.listen("open", TOOLS) as listener:
        assert bus.publish(tools_changed()) == 1
        bus.close()
        assert bus.listener_count == 0
        assert (await listener.receive()).params == {"n": 0}  # queued events stay
        with pytest.raises(trio.EndOfChannel):
            await listener.receive()
        assert not listener.overflowed  # a clean end, not a cut-off
    async with bus.listen("late", TOOLS) as late:
        assert bus.listener_count == 0
        assert bus.publish(tools_changed()) == 0
        with pytest.raises(trio.EndOfChannel):
            await late.receive()
        assert not late.overflowed


FLAG_CASES = [  # a filter, and whether tools/list_changed matches it
    ({"toolsListChanged": True}, True),
    ({"toolsListChanged": True, "promptsListChanged": True}, True),
    ({"toolsListChanged": False}, False),
    ({"toolsListChanged": "true"}, False),
    ({"toolsListChanged": 1}, False),
    ({"promptsListChanged": True}, False),
    ({}, False),
]
RESOURCE_CASES = [  # an updated URI, the watched list, and whether they match
    ("test://a/b", ["test://a/"], True),
    ("test://a/b", ["test://a"], True),
    ("test://a/b/c", ["test://a/"], True),
    ("test://a/b", ["test://a/b"], True),
    ("test://a/", ["test://a/"], True),
    ("test://a/b", ["test://a//"], True),
    ("/x", ["/"], True),
    ("test://ab", ["test://a/"], False),
    ("test://ab", ["test://a"], False),
    ("test://a", ["test://a/b"], False),
    ("test://a/b", ["test://x", "test://a/"], True),
    ("test://a/b", [], False),
    ("test://a/b", "test://a/", False),  # not a list
    ("test://a/b", [None, 5], False),
]
TASK_CASES = [  # a filter, and whether task t1's notification matches it
    ({"taskIds": ["t1", "t2"]}, True),
    ({"taskIds": ("t1",)}, True),
    ({"taskIds": ["t2"]}, False),
    ({"taskIds": ["t"]}, False),  # no prefix matching outside resourceSubscriptions
    ({"taskIds": "t1"}, False),  # not a list
    ({"taskIds": True}, False),  # a value event is never selected by a flag
    ({"resourceSubscriptions": ["t1"]}, False),
    ({}, False),
]


def tools_list_changed() -> BusEvent:
    return flag_event("notifications/tools/list_changed", "toolsListChanged")


def task_t1_changed() -> BusEvent:
    return BusEvent("notifications/tasks", {"taskId": "t1"}, "taskIds", "t1")


@pytest.mark.parametrize(("agreed", "matches"), FLAG_CASES)
def test_flag_events_need_their_flag_true(agreed: dict[str, object], matches: bool) -> None:
    assert tools_list_changed().matches(agreed) is matches


@pytest.mark.parametrize(("uri", "watched", "matches"), RESOURCE_CASES)
def test_resource_updates_match_equal_or_parent_uris(
    uri: str, watched: object, matches: bool
) -> None:
    event = resource_updated_event(uri)
    assert event.params == {"uri": uri}
    assert event.matches({"resourceSubscriptions": watched}) is matches


@pytest.mark.parametrize(("agreed", "matches"), TASK_CASES)
def test_extension_keys_match_by_membership(agreed: dict[str, object], matches: bool) -> None:
    assert task_t1_changed().matches(agreed) is matches


def test_extension_ids_are_not_treated_as_uri_prefixes() -> None:
    event = BusEvent("notifications/tasks", {}, "taskIds", "t1/x")
    assert not event.matches({"taskIds": ["t1"]})
    assert not event.matches({"taskIds": ["t1/"]})
    assert event.matches({"taskIds": ["t1/x"]})


# --- the bus finds a matching listener through its index, never by asking every one --------

MATCHING_CASES = (
    [(tools_list_changed(), agreed, matches) for agreed, matches in FLAG_CASES]
    + [
        (resource_updated_event(uri), {"resourceSubscriptions": watched}, matches)
        for uri, watched, matches in RESOURCE_CASES
    ]
    + [(task_t1_changed(), agreed, matches) for agreed, matches in TASK_CASES]
    + [(BusEvent("notifications/tasks", {}, "taskIds", "t1/x"), {"taskIds": ["t1"]}, False)]
)


@pytest.mark.parametrize(("event", "agreed", "matches"), MATCHING_CASES)
async def test_publish_reaches_exactly_the_listeners_the_rule_matches(
    event: BusEvent, agreed: dict[str, Any], matches: bool
) -> None:
    assert event.matches(agreed) is matches  # the rule itself, as the bus must apply it
    bus = SubscriptionBus()
    async with bus.listen("s", agreed) as listener:
        assert bus.publish(event) == int(matches)
        assert waiting(listener) == int(matches)
    assert bus.listener_count == 0 and len(bus._audiences) == 0


_URI = st.text(alphabet="ab/:", max_size=6)
_FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "toolsListChanged": st.sampled_from([True, False, 1, "true"]),
        "resourceSubscriptions": st.lists(st.one_of(_URI, st.integers()), max_size=4),
        "taskIds": st.one_of(st.lists(_URI, max_size=3), st.just(True)),
    },
)
_EVENTS = st.one_of(
    st.just(flag_event("notifications/tools/list_changed", "toolsListChanged")),
    _URI.map(resource_updated_event),
    _URI.map(lambda value: BusEvent("notifications/tasks", {}, "taskIds", value)),
)


def waiting(listener: Listener) -> int:
    return listener.receive_channel.statistics().current_buffer_used


@settings(max_examples=300, deadline=None)
@given(filters=st.lists(_FILTERS, max_size=6), events=st.lists(_EVENTS, min_size=1, max_size=5))
def test_the_index_agrees_with_the_rule(
    filters: list[dict[str, Any]], events: list[BusEvent]
) -> None:
    """Any filters, any events: the listeners an event reaches are the ones whose filter it
    matches, and when the streams close the index holds nothing."""

    async def check() -> None:
        bus = SubscriptionBus()
        async with AsyncExitStack() as streams:
            listeners = [
                await streams.enter_async_context(bus.listen(n, agreed))
                for n, agreed in enumerate(filters)
            ]
            for event in events:
                before = [waiting(listener) for listener in listeners]
                delivered = bus.publish(event)
                reached = [
                    waiting(listener) > count or event.coalesce in listener.waiting
                    for listener, count in zip(listeners, before, strict=True)
                ]
                expected = [event.matches(listener.filter) for listener in listeners]
                assert reached == expected and delivered == sum(expected)
        assert bus.listener_count == 0 and len(bus._audiences) == 0

    trio.run(check)
