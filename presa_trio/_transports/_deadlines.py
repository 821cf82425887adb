"""The deadlines of the HTTP requests in flight, kept by one task of the run."""

from __future__ import annotations

import math
from typing import final

import trio

# The keeper looks a tenth of the shorter timeout apart, never more than a second apart and
# never less than a millisecond.
_TICKS_PER_TIMEOUT = 10
_LONGEST_TICK = 1.0
_SHORTEST_TICK = 0.001


@final
class Deadlines:
    """When each request's cancel scope is to be cancelled: its body's deadline, then its
    final write's.

    trio's own deadline (``CancelScope.deadline``) is exact and costs: setting or moving one
    goes through the run's deadline heap, and every scheduler pass consults that heap while
    any is set. Every request sets two, and the pair cost about a tenth of a request's time
    in process (bench/README.md, tenth round). A request's timeouts are seconds long and need
    not be exact, so here a deadline is an entry in a dict, and one task of the run
    (``keep``) cancels the scopes whose time has come, looking every ``tick`` seconds while
    any deadline is set. A deadline is counted in the keeper's looks, not read from the
    clock: it falls on the look after the timeout's worth of them, so it is never early (the
    looks are at least a tick apart) and at most about two ticks late.

    While no task keeps them (before the run starts, after it ends), a deadline is trio's own.
    """

    __slots__ = ("_due", "_idle", "_kept", "_looks", "tick")

    def __init__(self, *timeouts: float) -> None:
        shortest = min(timeouts, default=math.inf) / _TICKS_PER_TIMEOUT
        self.tick = max(_SHORTEST_TICK, min(shortest, _LONGEST_TICK))
        self._due: dict[trio.CancelScope, float] = {}  # the look each is cancelled at
        self._looks = 0  # the keeper's, so far
        self._kept = False
        self._idle: trio.Event | None = None  # what the keeper waits on, with nothing armed

    def arm(self, scope: trio.CancelScope, seconds: float) -> None:
        """Cancel ``scope`` ``seconds`` from now, instead of at any deadline armed before."""
        if not self._kept:
            scope.deadline = trio.current_time() + seconds
            return
        if self._idle is not None:
            self._idle.set()
            self._idle = None
        # The next look may be a moment away: one look more than the timeout's worth.
        self._due[scope] = self._looks + 1 + seconds / self.tick

    def disarm(self, scope: trio.CancelScope) -> None:
        """``scope`` has no deadline from now on (it may have ended)."""
        if self._kept:
            self._due.pop(scope, None)
        else:
            scope.deadline = math.inf

    def passed(self, scope: trio.CancelScope) -> bool:
        """Whether ``scope``'s deadline has passed: it was cancelled for that."""
        if self._kept:
            return scope not in self._due
        return trio.current_time() >= scope.deadline

    async def keep(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Cancel each scope when its deadline passes, until cancelled (the run's end);
        then hand every deadline still armed to trio. Kept from ``task_status.started()``."""
        self._kept = True
        task_status.started()
        try:
            while True:
                if not self._due:
                    self._idle = trio.Event()
                    await self._idle.wait()
                await trio.sleep(self.tick)
                self._looks += 1
                late = [scope for scope, look in self._due.items() if look <= self._looks]
                for scope in late:
                    del self._due[scope]
                    scope.cancel()
        finally:
            self._kept, self._idle = False, None
            now = trio.current_time()
            for scope, look in self._due.items():
                scope.deadline = now + (look - self._looks) * self.tick
            self._due.clear()
