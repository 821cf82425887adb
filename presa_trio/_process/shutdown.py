"""The one bound on shutdown: once a process begins to stop, it is gone within ``seconds``.

Structured concurrency waits for every task to finish, which is right until one cannot: a
tool in a shielded sleep, or one that swallows its cancellation, would hold a stopping
process forever. ``ShutdownBound`` is the process owner's answer: a timer thread that ends
the process if shutdown has not finished in time. It does nothing until started, and nothing
once cancelled. Ending a process is policy, so only its owner arms one: the ``presa-trio``
command always does, an ``AsgiApp`` only when its program asks (``shutdown_timeout=``); a
library embedded in someone else's process never does on its own.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import final

logger = logging.getLogger("presa_trio")

#: The exit status of a process the bound ended (EX_SOFTWARE).
EXIT_STATUS = 70
#: The bound ``presa-trio serve`` arms unless told otherwise (``--shutdown-timeout``).
DEFAULT_SECONDS = 10.0


@final
class ShutdownBound:
    """Ends the process if a shutdown that began has not finished within ``seconds``."""

    def __init__(self, seconds: float | None, exit: Callable[[int], object] = os._exit) -> None:
        self.seconds = seconds
        self._exit = exit
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._timer is not None

    def start(self) -> None:
        """Shutdown has begun: the clock runs (once; later calls change nothing)."""
        with self._lock:
            if self.seconds is None or self._timer is not None:
                return
            self._timer = threading.Timer(self.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        """Shutdown finished in time."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()

    def _expire(self) -> None:
        logger.critical(
            "shutdown did not finish within %g s (work that ignores cancellation?); exiting now",
            self.seconds,
        )
        for handler in logging.getLogger().handlers + logger.handlers:
            handler.flush()
        self._exit(EXIT_STATUS)
