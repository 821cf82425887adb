"""Run a coroutine in the calling task and learn whether, and when, it first waits.

A request that is answered without ever giving way to the scheduler cannot be cancelled
by anything meanwhile, so nothing needs to watch it. ``await_noticing_wait`` lets the HTTP
edge start a request's disconnect watcher only when the request first waits: most requests
never pay for one.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


@types.coroutine
def await_noticing_wait(
    coro: Coroutine[Any, Any, T], on_wait: Callable[[], None]
) -> Generator[Any, Any, T]:
    """``await coro``, calling ``on_wait()`` just before ``coro`` first yields to the
    scheduler (never, if it runs to its end without waiting).

    Past its first step this passes every value and exception between the scheduler and
    ``coro`` as ``await`` itself does: ``coro`` still runs in the calling task, under its
    cancel scopes and context. (One difference a debugger may show: a walk of the task's
    await stack, such as ``Task.iter_await_frames``, stops at this frame.)
    """
    try:
        waiting_on = coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    try:
        on_wait()
    except BaseException:
        coro.close()
        raise
    while True:
        try:
            answer = yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as thrown:  # the scheduler's: ``coro``'s to handle
            try:
                waiting_on = coro.throw(thrown)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            try:
                waiting_on = coro.send(answer)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            finally:
                # The answer may carry an exception (trio's outcome of a cancelled wait)
                # that now propagates through this frame: kept here, it would hold its own
                # traceback, and every frame in it, in a cycle until the next GC.
                del answer
