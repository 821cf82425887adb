"""A database at a distance, for bench/backend_bench.py: a TCP proxy on 127.0.0.1 that
forwards to a Unix socket and holds every chunk it passes for a delay, each way.

    python bench/slow_proxy.py PORT SOCKET DELAY_SECONDS

Each round trip through it costs two delays plus the proxy's own thread hops (about 0.1
ms on the machines these figures come from): what a statement waits for when the
database is on another host. It runs as a process of its own, so its threads take
nothing from the measured process. It stops when killed.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time


def pump(source: socket.socket, target: socket.socket, delay: float) -> None:
    with contextlib.suppress(OSError):  # either end gone: the connection is over
        while data := source.recv(65536):
            time.sleep(delay)
            target.sendall(data)
    for end in (source, target):
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)


def serve(port: int, upstream: str, delay: float) -> None:
    listener = socket.create_server(("127.0.0.1", port))
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        database = socket.socket(socket.AF_UNIX)
        database.connect(upstream)
        for source, target in ((client, database), (database, client)):
            threading.Thread(target=pump, args=(source, target, delay), daemon=True).start()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
