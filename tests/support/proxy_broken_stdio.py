"""A stdio "server" that breaks the schema, for the proxy's tests: for each request line it
writes a ``tools/call``-shaped result whose ``content`` is a string, then a line that is not
JSON. It exits with status 3 at the end of its input (the proxy passes that status on)."""

from __future__ import annotations

import json
import sys

for line in sys.stdin:
    request = json.loads(line)
    result = {"resultType": "complete", "content": "not a list"}
    print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
    print("debug output on stdout", flush=True)
print("the end of input", file=sys.stderr, flush=True)
sys.exit(3)
