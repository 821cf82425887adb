"""Record a stdio MCP conversation as a capture: ``python capture_tee.py CAPTURE -- CMD ARGS``.

Spawns CMD, copies this process's stdin to CMD's stdin and CMD's stdout to this process's
stdout line by line, and appends each line to CAPTURE as a record ``{"direction": "client" |
"server", "message": ...}``, in the order the lines passed (a client spawns this in place of
the server). CMD's stderr is passed through. Exits with CMD's status when both streams end.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from typing import IO, Any


def main() -> int:
    capture, separator, *command = sys.argv[1:]
    assert separator == "--" and command, "usage: capture_tee.py CAPTURE -- CMD ARGS"
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()
    with open(capture, "a", encoding="utf-8") as out:

        def record(direction: str, raw: bytes) -> None:
            text = raw.decode("utf-8").rstrip("\r\n")
            if not text.strip():
                return
            try:
                message: Any = json.loads(text)
            except ValueError:
                message = text  # not JSON: kept as a string, which the checker reports
            with lock:
                out.write(json.dumps({"direction": direction, "message": message}) + "\n")
                out.flush()

        def pump(source: IO[bytes], sink: IO[bytes], direction: str) -> None:
            try:
                for raw in iter(source.readline, b""):
                    record(direction, raw)
                    sink.write(raw)
                    sink.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass
            finally:
                if direction == "client":
                    with contextlib.suppress(OSError):
                        sink.close()

        upstream = threading.Thread(
            target=pump, args=(sys.stdin.buffer, child.stdin, "client"), daemon=True
        )
        upstream.start()
        pump(child.stdout, sys.stdout.buffer, "server")
        return child.wait()


if __name__ == "__main__":
    sys.exit(main())
