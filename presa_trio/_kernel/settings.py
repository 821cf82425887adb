"""A server's configuration: the groups a user sets (``Limits``, ``Validation``, ``Listing``,
``RequestState``), ``Settings`` that holds them, and ``Served``: what the core methods read and
the capabilities it adds up to (spec 2026-07-28 server/discover.mdx).

Frozen values, checked when they are made and handed to the dispatcher and the core methods
when a server is built, so that nothing reads a ``Server`` back per request. No I/O and no
trio; the HTTP app's own settings (``Timeouts``) live with it, in ``_transports``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, TypedDict, final

from .._backends.protocol import parse_url
from .._protocol import dialect
from .._protocol.request_state import DEFAULT_MAX_STATE_BYTES, DEFAULT_TTL_SECONDS, KeyRing
from .context import Context
from .extension_hooks import Extension
from .middleware import Middleware
from .registry import Registry
from .tracing import Tracing


@final
@dataclass(frozen=True, slots=True)
class Limits:
    """How much one run may be made to hold; ``Server(limits=Limits(...))``.

    ``max_threads`` worker threads run sync handlers; ``max_listeners`` listen streams may
    be open at once (None: no bound); ``max_background`` pieces of ``ctx.start_background``
    work may run at once. Past the listen or the background bound the answer is a retryable
    -32603 (HTTP 503) naming it in ``data.limit``; a sync call waits for a thread instead.
    Each is counted in each worker, and one principal (``ctx.principal``) may hold only its
    share of it, so the rest stays for the others (None: no share):

    ======================================  =====  ==========================================
    Share of one principal, in one worker   Of     Past it
    ======================================  =====  ==========================================
    ``max_listeners_per_principal=100``     1,000  503, ``max_listen_streams_per_principal``
    ``max_background_per_principal=100``    1,000  503, ``max_background_tasks_per_principal``
    ``max_threads_per_principal=20``        40     its sync calls wait for its own threads
    ======================================  =====  ==========================================

    A call abandoned in its thread keeps its place in the share until its function returns.
    The anonymous principal "" (no ``principal`` function and no ``auth``: a server that
    cannot tell its clients apart) holds no share; only the bounds apply to it.
    """

    max_threads: int = 40
    # A principal's share: half the threads, which are few and waited for rather than
    # refused; a tenth of the streams and of the background work, as a principal's task
    # quota is a tenth of the store.
    max_threads_per_principal: int | None = 20
    max_listeners: int | None = 1_000
    max_listeners_per_principal: int | None = 100
    max_background: int = 1_000
    max_background_per_principal: int | None = 100

    def __post_init__(self) -> None:
        if self.max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        if self.max_listeners is not None and self.max_listeners < 0:
            raise ValueError("max_listeners must be at least 0 (None: no bound)")
        if self.max_background < 0:
            raise ValueError("max_background must be at least 0")
        for share in (
            "max_threads_per_principal",
            "max_listeners_per_principal",
            "max_background_per_principal",
        ):
            value = getattr(self, share)
            if value is not None and value < 1:
                raise ValueError(f"{share} must be at least 1 (None: no share)")


@final
@dataclass(frozen=True, slots=True)
class Validation:
    """Which messages are checked against the 2026-07-28 schema; ``Server(validation=...)``.

    ``inbound``: every request, before its handler runs (one that does not conform is
    -32602). ``outbound``: every result, error and notification the server sends (a result
    that does not conform is logged and answered -32603 instead): for tests and
    development, as it costs every response a validation.
    """

    inbound: bool = True
    outbound: bool = False


@final
@dataclass(frozen=True, slots=True)
class Listing:
    """How list results are cached and cut (wire §9); ``Server(listing=...)``.

    ``ttl_ms`` and ``cache_scope`` are the ``ttlMs`` and ``cacheScope`` of ``server/discover``
    and of every list result: how long a client may keep them, and whether a shared cache
    may (``"public"``) or only the client's own (``"private"``). ``page_size`` cuts a list
    into pages of that many entries, each with a ``nextCursor`` to the next (None: one page).
    """

    ttl_ms: int = 60_000
    cache_scope: Literal["public", "private"] = "public"
    page_size: int | None = None

    def __post_init__(self) -> None:
        if self.ttl_ms < 0:
            raise ValueError("ttl_ms must be at least 0")
        if self.cache_scope not in ("public", "private"):
            raise ValueError("cache_scope must be 'public' or 'private'")
        if self.page_size is not None and self.page_size < 1:
            raise ValueError("page_size must be at least 1 (None: one page)")


@final
@dataclass(frozen=True, slots=True)
class RequestState:
    """How the server seals the ``requestState`` of an input round (wire §10.4);
    ``Server(request_state=...)``.

    ``keys`` sign and verify it (None: the key the run's shared backend keeps, else one made
    for this process, which another worker or a restart cannot verify); ``ttl`` is how many
    seconds a client has to answer; a state larger than ``max_bytes`` is not issued (-32603),
    as it must come back inside a request body.
    """

    keys: KeyRing | None = None
    ttl: float = DEFAULT_TTL_SECONDS
    max_bytes: int = DEFAULT_MAX_STATE_BYTES

    def __post_init__(self) -> None:
        if self.max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")


@final
@dataclass(frozen=True, slots=True)
class Sessions:
    """The older era's ``initialize`` sessions; ``Server(sessions=Sessions(...))``.

    On by default (``enabled``), as in both official SDKs: a client that opens with
    ``initialize`` (revisions 2025-06-18 and 2025-11-25) gets a session kept in the run's
    backend, served by every worker. ``Server(legacy=False)`` serves 2026-07-28 only.

    ``idle_ttl`` seconds without a request end a session; at most ``max_sessions`` are open
    at once, ``max_sessions_per_principal`` of them one principal's (503 past either, naming
    it in ``data.limit``). A tool's ``ctx.input`` on a session is a request to the client,
    answered within ``push_timeout`` seconds or the call fails; a session has at most
    ``max_pending_pushes`` of them waiting on one worker, and all sessions of one principal
    at most ``max_pending_pushes_per_principal`` (None: no share; the anonymous principal ""
    holds no share, as with ``Limits``).

    ``resumable``: a 2025-11-25 session's ``tools/call``, ``resources/read`` and
    ``prompts/get`` answer on a stream that survives a dropped connection. Each message is
    logged in the run's backend before it is sent; the stream opens with a priming event
    (an id, and ``retry`` seconds for the client to wait before reconnecting), and a client
    that reconnects with ``Last-Event-ID`` to any worker gets what followed, then the rest.
    A dropped connection no longer cancels such a request (``notifications/cancelled``
    does). A stream logs at most ``max_stream_events`` messages and ``max_stream_bytes`` of
    them (its answer always; later notifications are sent but not logged), is kept
    ``stream_retention`` seconds after its answer, and a session keeps at most
    ``max_streams_per_session`` (its oldest answered ones are let go first).
    """

    enabled: bool = True
    idle_ttl: float = 3600.0
    max_sessions: int = 10_000
    max_sessions_per_principal: int | None = 1_000
    push_timeout: float = 300.0
    max_pending_pushes: int = 16
    max_pending_pushes_per_principal: int | None = 100
    resumable: bool = True
    retry: float = 1.0
    stream_retention: float = 300.0
    max_stream_events: int = 10_000
    max_stream_bytes: int = 8 * 1024 * 1024
    max_streams_per_session: int = 100

    def __post_init__(self) -> None:
        if not self.retry >= 0 or not self.stream_retention > 0:
            raise ValueError("retry must be at least 0 and stream_retention positive")
        for name in ("max_stream_events", "max_stream_bytes", "max_streams_per_session"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not self.idle_ttl > 0:
            raise ValueError("idle_ttl must be positive")
        if not self.push_timeout > 0:
            raise ValueError("push_timeout must be positive")
        if self.max_sessions < 1 or self.max_pending_pushes < 1:
            raise ValueError("max_sessions and max_pending_pushes must be at least 1")
        for name in ("max_sessions_per_principal", "max_pending_pushes_per_principal"):
            share = getattr(self, name)
            if share is not None and share < 1:
                raise ValueError(f"{name} must be at least 1 (None: no share)")


DEFAULT_LIMITS = Limits()
DEFAULT_VALIDATION = Validation()
DEFAULT_LISTING = Listing()
DEFAULT_REQUEST_STATE = RequestState()
DEFAULT_SESSIONS = Sessions()


class OldSettings(TypedDict, total=False):
    """``Server``'s keyword arguments from before the groups: deprecated, still honoured."""

    validate_inbound: bool
    validate_outbound: bool
    list_ttl_ms: int
    cache_scope: Literal["public", "private"]
    page_size: int | None
    state_keys: KeyRing | None
    state_ttl: float
    max_state_bytes: int
    max_threads: int
    max_threads_per_principal: int | None
    max_listeners: int | None
    max_listeners_per_principal: int | None
    max_background: int
    max_background_per_principal: int | None


Groups = tuple[Limits, Validation, Listing, RequestState]
# Each group's keyword in ``Server``, and its class.
_CLASS_OF = {
    "limits": "Limits",
    "validation": "Validation",
    "listing": "Listing",
    "request_state": "RequestState",
}
# Where each old keyword went: its group's keyword, and its name there.
_MOVED = {
    "validate_inbound": ("validation", "inbound"),
    "validate_outbound": ("validation", "outbound"),
    "list_ttl_ms": ("listing", "ttl_ms"),
    "cache_scope": ("listing", "cache_scope"),
    "page_size": ("listing", "page_size"),
    "state_keys": ("request_state", "keys"),
    "state_ttl": ("request_state", "ttl"),
    "max_state_bytes": ("request_state", "max_bytes"),
    **{limit.name: ("limits", limit.name) for limit in fields(Limits)},
}


def regroup(groups: Groups, old: OldSettings) -> Groups:
    """``groups`` with the old keyword arguments ``old`` put in their places, each with a
    ``DeprecationWarning`` naming its replacement (for the caller of ``Server``)."""
    changes: dict[str, dict[str, Any]] = {group: {} for group in _CLASS_OF}
    for name, value in old.items():
        if name not in _MOVED:
            raise TypeError(f"Server() got an unexpected keyword argument {name!r}")
        group, field = _MOVED[name]
        warnings.warn(
            f"Server({name}=...) is deprecated: "
            f"use Server({group}=presa_trio.{_CLASS_OF[group]}({field}=...))",
            DeprecationWarning,
            stacklevel=3,
        )
        changes[group][field] = value
    limits, validation, listing, request_state = groups
    return (
        replace(limits, **changes["limits"]),
        replace(validation, **changes["validation"]),
        replace(listing, **changes["listing"]),
        replace(request_state, **changes["request_state"]),
    )


@final
@dataclass(frozen=True, slots=True)
class Settings:
    """How one server answers; see ``Server`` and the groups for what each setting means."""

    server_info: Mapping[str, Any]
    instructions: str | None = None
    logging: bool = False
    supported_versions: tuple[str, ...] = dialect.SUPPORTED_VERSIONS
    principal: Callable[[Context], str] | None = None
    limits: Limits = DEFAULT_LIMITS
    validation: Validation = DEFAULT_VALIDATION
    listing: Listing = DEFAULT_LISTING
    request_state: RequestState = DEFAULT_REQUEST_STATE
    sessions: Sessions = DEFAULT_SESSIONS
    loop_warning: float | None = 0.5
    backend: str | None = None
    tracing: Tracing | None = None  # None: no spans, and opentelemetry is never imported

    def __post_init__(self) -> None:
        if self.backend is not None:
            parse_url(self.backend)  # an unknown scheme or a bad path fails here, at once


@final
@dataclass(frozen=True, slots=True)
class Served:
    """What the core methods read: the registry, the settings, the extensions and the
    middleware (the older era's sessions run it themselves)."""

    registry: Registry
    settings: Settings
    extensions: Sequence[Extension]
    middleware: Sequence[Middleware] = ()

    def capabilities(self) -> dict[str, Any]:
        """The server capabilities ``server/discover`` advertises, from what is declared."""
        registry = self.registry
        caps: dict[str, Any] = {}
        if registry.tools:
            caps["tools"] = {"listChanged": True}
        if registry.serves_resources:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if registry.prompts:
            caps["prompts"] = {"listChanged": True}
        if registry.completers:
            caps["completions"] = {}
        if self.settings.logging:
            caps["logging"] = {}
        if self.extensions:
            caps["extensions"] = {e.id: e.settings() for e in self.extensions}
        return caps

    def can_notify(self) -> bool:
        """Whether ``subscriptions/listen`` has anything to deliver."""
        registry = self.registry
        return bool(registry.tools or registry.prompts or registry.serves_resources) or any(
            e.filter_keys() for e in self.extensions
        )
