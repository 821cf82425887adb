"""Error boundaries: where work run for user code stops an error from travelling further.

The idea is hypercorn's (``trio/task_group.py`` ``_handle``): split ``trio.Cancelled`` out of
whatever arrived, let it propagate to the scope that owns it, log the rest, carry on. A
``KeyboardInterrupt`` or ``SystemExit`` is never caught here: they belong to the process.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import InternalError, McpError

logger = logging.getLogger("presa_trio")


def partition(
    exc: BaseException, also: tuple[type[BaseException], ...] = ()
) -> tuple[BaseException | None, BaseException | None]:
    """``(everything else, the errors)`` of an exception that may be a group.

    The errors are the ``Exception`` leaves (and those of the ``also`` types): what a boundary
    logs and turns into an outcome. Everything else is cancellation, or belongs to the process:
    what a boundary must re-raise.
    """
    kinds: tuple[type[BaseException], ...] = (Exception, *also)
    if isinstance(exc, BaseExceptionGroup):
        errors, others = exc.split(kinds)
        return others, errors
    return (None, exc) if isinstance(exc, kinds) else (exc, None)


def single(errors: BaseException) -> BaseException:
    """The one error inside nested single-member groups, or the group itself."""
    while isinstance(errors, BaseExceptionGroup) and len(errors.exceptions) == 1:
        errors = errors.exceptions[0]
    return errors


def absorb(exc: BaseException, what: str, log: logging.Logger = logger) -> None:
    """Log the errors in ``exc`` as ``what failed``; re-raise whatever else it holds.

    Cancellation passes through untouched (also out of a group that mixed it with errors),
    so the cancel scope that asked for it still catches it.
    """
    others, errors = partition(exc)
    if errors is not None:
        log.error("%s failed", what, exc_info=errors)
    if others is not None:
        raise others from None


@contextmanager
def error_boundary(what: str, log: logging.Logger = logger) -> Iterator[None]:
    """A block whose ordinary errors are logged and stop here (see ``absorb``)."""
    try:
        yield
    except BaseException as exc:
        absorb(exc, what, log)


def protocol_error(
    exc: BaseException,
    what: str,
    *,
    also: tuple[type[BaseException], ...] = (),
    log: logging.Logger = logger,
) -> McpError:
    """The protocol error to report for ``exc``, raised by work done for ``what``.

    An ``McpError`` (alone, also inside groups of one) is reported as it is; any other error
    is logged and reported as -32603 without detail. Cancellation is re-raised (see
    ``absorb``); ``also`` names other ``BaseException`` types to treat as errors.
    """
    others, errors = partition(exc, also)
    if errors is not None:
        found = single(errors)
        if isinstance(found, McpError) and others is None:
            return found
        log.error("%s failed", what, exc_info=errors)
    if others is not None:
        raise others from None
    return InternalError("Internal error")
