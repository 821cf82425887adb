"""Exercise 3, solved: no bounds inside, both downloads in one nursery."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

Download = Callable[[str], Awaitable[str]]


async def fetch(name: str, download: Download) -> str:
    return await download(name)


async def fetch_both(first: str, second: str, download: Download) -> list[str]:
    contents = ["", ""]

    async def one(index: int, name: str) -> None:
        contents[index] = await fetch(name, download)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one, 0, first)
        nursery.start_soon(one, 1, second)
    return contents
