"""Exercise 3: from ``timeout=`` parameters to the caller's scope.

``fetch_both`` gets two names with ``download`` and returns their contents, in order. Each
function takes a ``timeout``, so a caller with five seconds for both cannot say so. Remove
the ``timeout`` parameters (and every bound inside), so that the caller's own scope bounds
the whole, and fetch the two names concurrently.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

Download = Callable[[str], Awaitable[str]]


async def fetch(name: str, download: Download, timeout: float = 5.0) -> str | None:  # noqa: ASYNC109
    with trio.move_on_after(timeout):
        return await download(name)
    return None


async def fetch_both(
    first: str,
    second: str,
    download: Download,
    timeout: float = 5.0,  # noqa: ASYNC109
) -> list[str | None]:
    return [await fetch(first, download, timeout), await fetch(second, download, timeout)]
