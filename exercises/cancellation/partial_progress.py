"""Exercise 4: a task that reports its partial progress when it is cancelled.

``process_all`` processes ``items`` in order with ``process`` and returns the results. A
tool calls it inside a task, which a client may cancel. When it is cancelled, save the
results it has so far with ``await save_partial(results)``, given at most ``SAVE_SECONDS``,
and let the cancellation go on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

SAVE_SECONDS = 1.0

Process = Callable[[str], Awaitable[str]]
Save = Callable[[list[str]], Awaitable[None]]


async def process_all(items: Sequence[str], process: Process, save_partial: Save) -> list[str]:
    results = []
    for item in items:
        results.append(await process(item))
    return results
