"""Exercise 1, solved: the release runs under a shielded scope with a deadline of its own."""

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
        # The shield keeps the outer cancellation out; the deadline keeps a stuck release
        # from holding the cancel up for good. Cancelled then goes on by itself.
        with trio.move_on_after(CLEANUP_SECONDS, shield=True):
            await lease.release()
