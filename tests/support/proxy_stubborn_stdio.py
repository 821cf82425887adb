"""A stdio "server" that ignores the end of its input, for the proxy's tests: it says
``ready`` on stderr and then sleeps until a signal ends it (SIGTERM does, by default)."""

from __future__ import annotations

import sys
import time

print("ready", file=sys.stderr, flush=True)
while True:
    time.sleep(60)
