"""A server's configuration (``Settings``) and ``Served``: what the core methods read, and the
capabilities it adds up to (spec 2026-07-28 server/discover.mdx).

Plain values handed to the dispatcher and the core methods when a server is built, so that
nothing reads a ``Server`` back per request. No I/O and no trio.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

from .._backends.protocol import parse_url
from .._protocol import dialect
from .._protocol.request_state import DEFAULT_MAX_STATE_BYTES, DEFAULT_TTL_SECONDS, KeyRing
from .context import Context
from .extension_hooks import Extension
from .registry import Registry
from .tracing import Tracing

DEFAULT_MAX_THREADS = 40
DEFAULT_MAX_LISTENERS = 1_000
DEFAULT_MAX_BACKGROUND = 1_000
# What one principal may hold of each (see ``_shares``): a tenth of the streams and of the
# background work, as a principal's task quota is a tenth of the store; half the threads,
# which are few, and waited for rather than refused.
DEFAULT_MAX_THREADS_PER_PRINCIPAL = 20
DEFAULT_MAX_LISTENERS_PER_PRINCIPAL = 100
DEFAULT_MAX_BACKGROUND_PER_PRINCIPAL = 100


@final
@dataclass(frozen=True, slots=True)
class Settings:
    """How one server answers; see ``Server`` for what each setting means."""

    server_info: Mapping[str, Any]
    instructions: str | None = None
    validate_inbound: bool = True
    validate_outbound: bool = False
    list_ttl_ms: int = 60_000
    cache_scope: str = "public"
    page_size: int | None = None
    logging: bool = False
    supported_versions: tuple[str, ...] = dialect.SUPPORTED_VERSIONS
    principal: Callable[[Context], str] | None = None
    state_keys: KeyRing | None = None
    state_ttl: float = DEFAULT_TTL_SECONDS
    max_state_bytes: int = DEFAULT_MAX_STATE_BYTES
    max_threads: int = DEFAULT_MAX_THREADS
    max_threads_per_principal: int | None = DEFAULT_MAX_THREADS_PER_PRINCIPAL
    max_listeners: int | None = DEFAULT_MAX_LISTENERS
    max_listeners_per_principal: int | None = DEFAULT_MAX_LISTENERS_PER_PRINCIPAL
    max_background: int = DEFAULT_MAX_BACKGROUND
    max_background_per_principal: int | None = DEFAULT_MAX_BACKGROUND_PER_PRINCIPAL
    loop_warning: float | None = 0.5
    backend: str | None = None
    tracing: Tracing | None = None  # None: no spans, and opentelemetry is never imported

    def __post_init__(self) -> None:
        if self.cache_scope not in ("public", "private"):
            raise ValueError("cache_scope must be 'public' or 'private'")
        if self.max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        for share in (
            "max_threads_per_principal",
            "max_listeners_per_principal",
            "max_background_per_principal",
        ):
            value = getattr(self, share)
            if value is not None and value < 1:
                raise ValueError(f"{share} must be at least 1 (None: no share)")
        if self.backend is not None:
            parse_url(self.backend)  # an unknown scheme or a bad path fails here, at once


@final
@dataclass(frozen=True, slots=True)
class Served:
    """What the core methods read: the registry, the settings and the extensions."""

    registry: Registry
    settings: Settings
    extensions: Sequence[Extension]

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
