"""A minimal trio program answering every line on stdin with a fixed tools/call result.

Baseline for bench/stdio_bench.py only: no framework, no parsing, no validation, no task per
request; it reads stdin in chunks and writes one line per request line, as the raw HTTP app
answers fixed bytes.
"""

from __future__ import annotations

import os

import trio

from bench.raw_app import BODY

LINE = BODY + b"\n"


async def main() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    rest = b""
    while chunk := await stdin.receive_some(65536):
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            if line.strip():
                await stdout.send_all(LINE)


if __name__ == "__main__":
    trio.run(main)
