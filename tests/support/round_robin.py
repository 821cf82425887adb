"""A round-robin TCP balancer on 127.0.0.1, as in front of several instances of one server:
each new connection goes to the next backend port, and bytes are relayed both ways until
either side closes. Run it as a trio task for the length of a test."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import trio


async def _pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
    try:
        while data := await source.receive_some(65536):
            await sink.send_all(data)
        await sink.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass


async def _relay(client: trio.SocketStream, port: int) -> None:
    async with client:
        try:
            backend = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            return
        async with backend, trio.open_nursery() as both:
            both.start_soon(_pump, client, backend)
            both.start_soon(_pump, backend, client)


async def balance(ports: Sequence[int], *, task_status: trio.TaskStatus[int]) -> None:
    """Listen on a free 127.0.0.1 port (reported started) and spread connections over
    ``ports``, until cancelled."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    turn = itertools.cycle(ports)
    async with trio.open_nursery() as nursery:
        task_status.started(listeners[0].socket.getsockname()[1])

        async def handle(client: trio.SocketStream) -> None:
            await _relay(client, next(turn))

        await trio.serve_listeners(handle, listeners, handler_nursery=nursery)
