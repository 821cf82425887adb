"""Per-principal shares of a worker's own bounds: open listen streams, background work and
worker threads.

A bound counted once per worker lets one principal take all of it and shut every other out
(the task quotas count per principal for the same reason). A share caps what one principal
holds at once, so the rest of the bound stays for the others. This module does not say who a
principal is (callers pass ``ctx.principal``), and it counts in this worker only: each worker
of a deployment has its own bounds, and so its own shares.

The anonymous principal "" (no token and no ``principal`` function: a server that cannot tell
its clients apart) holds no share: it is bounded by the totals alone. There is no one to be
fair to, and a share would only shrink the server (a tenth of its listen streams, say).
"""

from __future__ import annotations

from typing import cast, final

import trio

from ..errors import CapacityExceeded


@final
class Shares:
    """One bounded resource of a worker, counted in all and per principal.

    ``limit`` bounds the total, ``per_principal`` what one principal holds (None: no bound).
    Past either, ``take`` raises the retryable ``CapacityExceeded`` naming it: ``name`` for
    the total, ``name + "_per_principal"`` for the share. The principal ``None`` (the
    server's own work) and the anonymous principal "" count in the total, never in a share.
    A principal's entry goes when it holds nothing again, so a principal seen once costs
    nothing after.
    """

    __slots__ = ("_held", "limit", "message", "name", "per_principal", "total")

    def __init__(
        self, limit: int | None, per_principal: int | None, name: str, message: str
    ) -> None:
        self.limit = limit
        self.per_principal = per_principal
        self.name = name
        self.message = message
        self.total = 0
        self._held: dict[str, int] = {}

    def held_by(self, principal: str) -> int:
        """How many ``principal`` holds now."""
        return self._held.get(principal, 0)

    @property
    def holders(self) -> int:
        """How many principals hold something now."""
        return len(self._held)

    def take(self, principal: str | None) -> None:
        """Count one more for ``principal``, or raise ``CapacityExceeded`` counting nothing."""
        if self.limit is not None and self.total >= self.limit:
            raise CapacityExceeded(self.name, self.message)
        if principal:
            held = self._held.get(principal, 0)
            if self.per_principal is not None and held >= self.per_principal:
                raise CapacityExceeded(
                    f"{self.name}_per_principal", f"{self.message} for one principal"
                )
            self._held[principal] = held + 1
        self.total += 1

    def give_back(self, principal: str | None) -> None:
        """Count one less for ``principal`` (one it took)."""
        self.total -= 1
        if principal:
            held = self._held[principal] - 1
            if held:
                self._held[principal] = held
            else:
                del self._held[principal]


@final
class ThreadShares:
    """A run's worker threads for sync handlers, shared out among principals.

    ``limiter`` bounds every thread of the run; with ``per_principal``, no principal holds
    more than that many at once. Past its share, a principal's next call waits for one of its
    own threads to come back, while the others' calls take the threads still free: threads
    are waited for, never refused. A principal's own limiter is made when it first asks and
    dropped when it holds and awaits none, so principals that come and go leave nothing.
    """

    __slots__ = ("_own", "limiter", "per_principal")

    def __init__(self, limiter: trio.CapacityLimiter, per_principal: int | None) -> None:
        self.limiter = limiter
        self.per_principal = per_principal
        self._own: dict[str, _Own] = {}

    def limiter_for(self, principal: str) -> trio.CapacityLimiter:
        """What bounds ``principal``'s threads, for ``trio.to_thread.run_sync(limiter=...)``.

        A thread abandoned by a cancelled call keeps its place in both bounds until its
        function returns: trio releases a limiter only then, so cancelling calls cannot
        free a share while their threads still run.
        """
        if self.per_principal is None or not principal:  # no share, or the anonymous one
            return self.limiter
        # trio takes any object with acquire_on_behalf_of and release_on_behalf_of.
        return cast(trio.CapacityLimiter, _Share(self, principal))

    @property
    def principals(self) -> int:
        """How many principals hold or await a thread now (each has its own limiter)."""
        return len(self._own)

    def _enter(self, principal: str) -> trio.CapacityLimiter:
        own = self._own.get(principal)
        if own is None:
            assert self.per_principal is not None
            own = self._own[principal] = _Own(trio.CapacityLimiter(self.per_principal))
        own.users += 1
        return own.limiter

    def _leave(self, principal: str) -> None:
        own = self._own[principal]
        own.users -= 1
        if not own.users:
            del self._own[principal]


@final
class _Own:
    """A principal's own limiter, and how many of its calls hold or await a thread."""

    __slots__ = ("limiter", "users")

    def __init__(self, limiter: trio.CapacityLimiter) -> None:
        self.limiter = limiter
        self.users = 0


@final
class _Share:
    """The limiter one call hands trio: its principal's share first, then the run's bound.

    Taken in that order, a call past its share waits without holding any of the run's
    threads; both are released together when the thread ends.
    """

    __slots__ = ("_principal", "_shares")

    def __init__(self, shares: ThreadShares, principal: str) -> None:
        self._shares = shares
        self._principal = principal

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        shares = self._shares
        own = shares._enter(self._principal)
        try:
            try:  # a free place in the share costs no second checkpoint: the run's bound yields
                own.acquire_on_behalf_of_nowait(borrower)
            except trio.WouldBlock:
                await own.acquire_on_behalf_of(borrower)
            try:
                await shares.limiter.acquire_on_behalf_of(borrower)
            except BaseException:
                own.release_on_behalf_of(borrower)
                raise
        except BaseException:
            shares._leave(self._principal)
            raise

    def release_on_behalf_of(self, borrower: object) -> None:
        shares = self._shares
        try:
            shares.limiter.release_on_behalf_of(borrower)
        finally:
            shares._own[self._principal].limiter.release_on_behalf_of(borrower)
            shares._leave(self._principal)
