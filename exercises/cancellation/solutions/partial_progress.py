"""Exercise 4, solved: save what is done on the way out, shielded and bounded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import trio

SAVE_SECONDS = 1.0

Process = Callable[[str], Awaitable[str]]
Save = Callable[[list[str]], Awaitable[None]]


async def process_all(items: Sequence[str], process: Process, save_partial: Save) -> list[str]:
    results: list[str] = []
    try:
        for item in items:
            results.append(await process(item))
    except trio.Cancelled:
        with trio.move_on_after(SAVE_SECONDS, shield=True):
            await save_partial(list(results))
        raise  # never swallowed
    return results
