"""Settings as value objects (``Limits``, ``Validation``, ``Listing``, ``RequestState``,
``Timeouts``): their defaults, what each refuses when it is made, and the keyword arguments they
replaced, which still work with a warning that names their new place."""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

import pytest

from presa_trio import (
    AsgiApp,
    KeyRing,
    Limits,
    Listing,
    RequestState,
    Server,
    Timeouts,
    Validation,
)


def test_each_group_holds_the_documented_defaults() -> None:
    assert Limits() == Limits(
        max_threads=40,
        max_threads_per_principal=20,
        max_listeners=1_000,
        max_listeners_per_principal=100,
        max_background=1_000,
        max_background_per_principal=100,
    )
    assert Validation() == Validation(inbound=True, outbound=False)
    assert Listing() == Listing(ttl_ms=60_000, cache_scope="public", page_size=None)
    assert RequestState() == RequestState(keys=None, ttl=600.0, max_bytes=65_536)
    assert Timeouts() == Timeouts(body=30.0, write=30.0)
    settings = Server("defaults").settings
    groups = (settings.limits, settings.validation, settings.listing, settings.request_state)
    assert groups == (Limits(), Validation(), Listing(), RequestState())


def test_a_server_keeps_the_groups_it_is_given() -> None:
    ring = KeyRing([("k1", b"k" * 32)])
    server = Server(
        "grouped",
        limits=Limits(max_threads=3, max_listeners=None),
        validation=Validation(outbound=True),
        listing=Listing(ttl_ms=0, cache_scope="private", page_size=10),
        request_state=RequestState(keys=ring, ttl=30.0),
    )
    settings = server.settings
    assert (settings.limits.max_threads, settings.limits.max_listeners) == (3, None)
    assert settings.validation == Validation(inbound=True, outbound=True)
    assert settings.listing == Listing(ttl_ms=0, cache_scope="private", page_size=10)
    assert settings.request_state.keys is ring
    assert settings.request_state.ttl == 30.0


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: Limits(max_threads=0), "max_threads"),
        (lambda: Limits(max_listeners=-1), "max_listeners"),
        (lambda: Limits(max_background=-1), "max_background"),
        (lambda: Limits(max_threads_per_principal=0), "max_threads_per_principal"),
        (lambda: Limits(max_listeners_per_principal=0), "max_listeners_per_principal"),
        (lambda: Limits(max_background_per_principal=0), "max_background_per_principal"),
        (lambda: Listing(ttl_ms=-1), "ttl_ms"),
        (lambda: Listing(cache_scope="shared"), "cache_scope"),  # type: ignore[arg-type]
        (lambda: Listing(page_size=0), "page_size"),
        (lambda: RequestState(max_bytes=0), "max_bytes"),
        (lambda: Timeouts(body=0), "body"),
        (lambda: Timeouts(write=-1.0), "write"),
        (lambda: Timeouts(body=math.nan), "body"),
    ],
)
def test_a_group_refuses_a_value_that_bounds_nothing(make: Any, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        make()


def test_no_bound_and_no_share_are_spelled_none_or_infinity() -> None:
    limits = Limits(max_listeners=None, max_threads_per_principal=None)
    assert (limits.max_listeners, limits.max_threads_per_principal) == (None, None)
    assert Timeouts(body=math.inf).body == math.inf


def test_a_group_is_frozen() -> None:
    with pytest.raises(AttributeError):
        Limits().max_threads = 1  # type: ignore[misc]


OLD_SERVER_KEYWORDS = [
    ("validate_inbound", False, "validation", "Validation", "inbound"),
    ("validate_outbound", True, "validation", "Validation", "outbound"),
    ("list_ttl_ms", 5, "listing", "Listing", "ttl_ms"),
    ("cache_scope", "private", "listing", "Listing", "cache_scope"),
    ("page_size", 7, "listing", "Listing", "page_size"),
    ("state_ttl", 9.0, "request_state", "RequestState", "ttl"),
    ("max_state_bytes", 1_024, "request_state", "RequestState", "max_bytes"),
    ("max_threads", 3, "limits", "Limits", "max_threads"),
    ("max_threads_per_principal", None, "limits", "Limits", "max_threads_per_principal"),
    ("max_listeners", 4, "limits", "Limits", "max_listeners"),
    ("max_listeners_per_principal", 2, "limits", "Limits", "max_listeners_per_principal"),
    ("max_background", 8, "limits", "Limits", "max_background"),
    ("max_background_per_principal", 1, "limits", "Limits", "max_background_per_principal"),
]


@pytest.mark.parametrize(("old", "value", "group", "cls", "field"), OLD_SERVER_KEYWORDS)
def test_an_old_server_keyword_still_works_and_names_its_replacement(
    old: str, value: object, group: str, cls: str, field: str
) -> None:
    replacement = f"use Server({group}=presa_trio.{cls}({field}=...))"
    with pytest.warns(DeprecationWarning, match=re.escape(replacement)) as caught:
        server = Server("old", **{old: value})
    assert [w.filename for w in caught] == [__file__]  # it points at the caller
    assert getattr(getattr(server.settings, group), field) == value


def test_old_state_keys_go_to_the_request_state() -> None:
    ring = KeyRing([("k1", b"k" * 32)])
    with pytest.warns(DeprecationWarning, match=re.escape("RequestState(keys=...)")):
        server = Server("old", state_keys=ring)
    assert server.settings.request_state.keys is ring


def test_old_keywords_are_checked_as_their_group_checks_them() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ValueError, match="max_threads_per_principal"):
            Server("old", max_threads_per_principal=0)
        with pytest.raises(ValueError, match="cache_scope"):
            Server("old", cache_scope="shared")  # type: ignore[typeddict-item]


def test_old_keywords_land_on_the_group_given_beside_them() -> None:
    with pytest.warns(DeprecationWarning):
        server = Server("mixed", limits=Limits(max_listeners=5), max_threads=3)
    assert (server.settings.limits.max_listeners, server.settings.limits.max_threads) == (5, 3)


def test_an_unknown_keyword_is_still_a_type_error() -> None:
    with pytest.raises(TypeError, match="max_thread"):
        Server("typo", max_thread=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="body_timout"):
        Server("typo").asgi_app(body_timout=3)  # type: ignore[call-arg]


def test_the_app_takes_its_deadlines_as_timeouts() -> None:
    app = Server("http").asgi_app(timeouts=Timeouts(body=5.0, write=6.0))
    assert app.timeouts == Timeouts(body=5.0, write=6.0)
    assert (app.body_timeout, app.write_timeout) == (5.0, 6.0)
    assert Server("http").asgi_app().timeouts == Timeouts()


@pytest.mark.parametrize(("old", "field"), [("body_timeout", "body"), ("write_timeout", "write")])
def test_an_old_timeout_keyword_still_works_and_names_its_replacement(old: str, field: str) -> None:
    server = Server("old")
    replacement = f"use asgi_app(timeouts=presa_trio.Timeouts({field}=...))"
    with pytest.warns(DeprecationWarning, match=re.escape(replacement)) as caught:
        app = server.asgi_app(**{old: 2.0})
    assert [w.filename for w in caught] == [__file__]
    assert getattr(app.timeouts, field) == 2.0
    replacement = f"use AsgiApp(timeouts=presa_trio.Timeouts({field}=...))"
    with pytest.warns(DeprecationWarning, match=re.escape(replacement)) as caught:
        direct = AsgiApp(server.dispatcher, server.open_runtime, **{old: 3.0})
    assert [w.filename for w in caught] == [__file__]
    assert getattr(direct.timeouts, field) == 3.0


def test_an_app_arms_no_shutdown_bound_unless_asked() -> None:
    """Ending the process is process policy: ``presa-trio serve`` arms its own bound; an
    app embedded in someone else's process arms one only when its program asks."""
    server = Server("embedded")
    assert server.asgi_app().shutdown_bound.seconds is None
    assert server.asgi_app(shutdown_timeout=10).shutdown_bound.seconds == 10
