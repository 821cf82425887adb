"""Exercise 1: bound a cleanup.

``hold`` holds a lease until it is cancelled. Then it must give the lease back with
``await lease.release()``, which may be slow or never return. Make the release happen even
though the scope around ``hold`` is cancelled, give it at most ``CLEANUP_SECONDS``, and let
the cancellation go on to the scope that asked for it.
"""

from __future__ import annotations

from typing import Protocol

import trio

CLEANUP_SECONDS = 2.0


class Lease(Protocol):
    async def release(self) -> None: ...


async def hold(lease: Lease) -> None:
    try:
        await trio.sleep_forever()
    finally:
        await lease.release()  # cancelled at once, and unbounded: fix this
