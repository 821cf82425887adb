"""A TCP balancer on 127.0.0.1 that cuts a stream mid-call, as a proxy or a network does:
connections go round-robin to the backend ports, bytes are relayed both ways, and the first
response that carries ``marker`` is cut right after the SSE event holding it (both sockets
closed, no end of the HTTP response). A connection whose request carries ``Last-Event-ID``
is sent to another backend than the one the cut happened on, so a resumption is always
served elsewhere. ``Journal`` says what went where."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

HEADERS_END = b"\r\n\r\n"


@dataclass
class Journal:
    """Each connection's backend port and first request head; where the cut was."""

    connections: list[tuple[int, bytes]] = field(default_factory=list)
    cut_port: int | None = None

    def resumed_on(self) -> list[int]:
        """The ports the resumptions (GETs with Last-Event-ID) went to."""
        return [port for port, head in self.connections if b"\r\nlast-event-id:" in head.lower()]


async def _head(client: trio.SocketStream) -> bytes:
    """The client's first bytes, up to the end of the request's headers."""
    data = b""
    while HEADERS_END not in data:
        chunk = await client.receive_some(65536)
        if not chunk:
            break
        data += chunk
    return data


async def balance(
    ports: Sequence[int], marker: bytes, journal: Journal, *, task_status: trio.TaskStatus[int]
) -> None:
    """Listen on a free 127.0.0.1 port (reported started) until cancelled."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    turn = itertools.cycle(ports)

    async def handle(client: trio.SocketStream) -> None:
        async with client:
            try:
                head = await _head(client)
            except (trio.BrokenResourceError, OSError):
                return
            port = next(turn)
            if b"\r\nlast-event-id:" in head.lower() and port == journal.cut_port:
                port = next(turn)
            journal.connections.append((port, head))
            try:
                backend = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                return
            async with backend, trio.open_nursery() as both:
                await backend.send_all(head)
                both.start_soon(_upstream, client, backend, both.cancel_scope)
                both.start_soon(_downstream, backend, client, port, marker, journal, both)

    async with trio.open_nursery() as nursery:
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(handle, listeners, handler_nursery=nursery)


async def _upstream(
    client: trio.SocketStream, backend: trio.SocketStream, both: trio.CancelScope
) -> None:
    try:
        while data := await client.receive_some(65536):
            await backend.send_all(data)
        await backend.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        both.cancel()


async def _downstream(
    backend: trio.SocketStream,
    client: trio.SocketStream,
    port: int,
    marker: bytes,
    journal: Journal,
    both: trio.Nursery,
) -> None:
    buffered = b""
    try:
        while data := await backend.receive_some(65536):
            if journal.cut_port is None:
                buffered += data
                at = buffered.find(marker)
                if at >= 0:
                    end = buffered.find(b"\n\n", at)
                    if end >= 0:  # the event holding the marker is whole: send it, then cut
                        upto = len(data) - (len(buffered) - (end + 2))
                        await client.send_all(data[:upto])
                        journal.cut_port = port
                        both.cancel_scope.cancel()
                        return
                buffered = buffered[-len(marker) - 65536 :]
            await client.send_all(data)
        await client.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        both.cancel_scope.cancel()
