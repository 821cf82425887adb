"""Running a command under valgrind's callgrind and reading its count of instructions, for
the benchmarks that count work instead of timing it (``asgi_profile.py --instructions``,
``http_work.py``)."""

from __future__ import annotations

import re
import shutil

PREFIX = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
MISSING = "valgrind not found (on Debian: apt-get install -y valgrind)"


def available() -> bool:
    return shutil.which("valgrind") is not None


def collected(stderr: str) -> int:
    """The instructions callgrind reports on ``stderr`` as the command ends."""
    found = re.search(r"Collected : (\d+)", stderr)
    if found is None:
        raise RuntimeError(f"no count from valgrind:\n{stderr}")
    return int(found.group(1))
