"""``Timeouts``: the HTTP app's deadlines on a client, as one value (``asgi_app(timeouts=...)``).

A frozen value checked when it is made; the app reads it once, when it is built. It holds no
deadline on the server's own work (a request runs for as long as its handler takes) and none
on the process: how long a stopping process may take is the process owner's to bound
(``shutdown_timeout``, ``presa-trio serve --shutdown-timeout``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import TypedDict, final


@final
@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long the HTTP app waits on a client, in seconds (``math.inf``: no deadline).

    ``body``: a request's body must have arrived within it from the request's start (408
    after it; the handler never runs). ``write``: each write to a client that has stopped
    reading may take that long, after which its request is dropped like a disconnected one.
    """

    body: float = 30.0
    write: float = 30.0

    def __post_init__(self) -> None:
        for name in ("body", "write"):
            value = getattr(self, name)
            if math.isnan(value) or value <= 0:
                raise ValueError(f"the {name} timeout must be more than 0 seconds")


DEFAULT_TIMEOUTS = Timeouts()


class OldTimeouts(TypedDict, total=False):
    """The HTTP app's keyword arguments from before ``Timeouts``: deprecated, still honoured."""

    body_timeout: float
    write_timeout: float


_MOVED = {"body_timeout": "body", "write_timeout": "write"}


def regroup_timeouts(timeouts: Timeouts, old: OldTimeouts, caller: str) -> Timeouts:
    """``timeouts`` with the old keyword arguments ``old`` in their places, each with a
    ``DeprecationWarning`` naming its replacement (for the caller of ``caller``)."""
    changes: dict[str, float] = {}
    for name, value in old.items():
        if name not in _MOVED:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")
        field = _MOVED[name]
        warnings.warn(
            f"{caller}({name}=...) is deprecated: "
            f"use {caller}(timeouts=presa_trio.Timeouts({field}=...))",
            DeprecationWarning,
            stacklevel=3,
        )
        changes[field] = value  # type: ignore[assignment]
    return replace(timeouts, **changes)
