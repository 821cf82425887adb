"""``Runtime``: everything one run of a server owns, from startup to shutdown.

A ``Server`` only declares; ``async with server.open_runtime() as runtime`` runs it: the
listen bus, the background nursery, the extensions' services, the thread limiter for sync
handlers and the ``requestState`` sealer all belong to that run and die with it, so a server
can be run again, or twice at once. Transports receive the runtime. It does no protocol work.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, ClassVar, Generic, final, overload

import trio
from typing_extensions import TypeVar

from .._backends.protocol import Backend, BackendHealth, MemoryBackend
from .._boundary import error_boundary
from .._protocol.request_state import StateSealer
from ..errors import InternalError, ServiceUnavailable
from .bus import BusEvent, SubscriptionBus, flag_event, resource_updated_event
from .sessions import RunSessions
from .shares import Shares, ThreadShares

logger = logging.getLogger("presa_trio")

BUS_TOPIC = "bus"
RELAY_BUFFER = 10_000  # events waiting to go to the other workers
RELAY_BATCH = 500  # events sent in one message at most


#: The type of the service a provider starts (``Any`` for one that does not say).
ServiceT = TypeVar("ServiceT", default=Any)
_S = TypeVar("_S")


class ServiceProvider(Generic[ServiceT]):
    """What starts a service in every run and is known by its ``id``: an ``Extension``,
    whose ``serve`` hands the service to ``task_status.started``. ``Runtime.service`` (and
    ``ctx.service``) give that service back typed as ``ServiceT``."""

    #: The identifier a run keeps the service under (prefix required for an extension).
    id: ClassVar[str] = ""


def _plain(event: BusEvent) -> dict[str, Any]:
    return {"method": event.method, "params": event.params, "key": event.key, "value": event.value}


@final
class Runtime:
    """One run of a server. Made by ``Server.open_runtime()``, never by hand.

    Handlers reach it as ``ctx.runtime``: to announce list changes, to find an extension's
    service for this run, and (through ``Context``) to run sync code in a bounded thread pool.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        sealer: StateSealer,
        thread_limiter: trio.CapacityLimiter,
        threads_per_principal: int | None = None,
        bus: SubscriptionBus | None = None,
        backend: Backend | None = None,
        max_background: int = 1_000,
        max_background_per_principal: int | None = None,
        lifespan_state: Any = None,
        mounted_lifespans: Mapping[object, Any] | None = None,
    ) -> None:
        self._nursery = nursery
        #: What the server's ``lifespan`` yielded for this run (``ctx.lifespan``).
        self.lifespan_state = lifespan_state
        #: What each mounted server's lifespan yielded, by server (``Server.mount``).
        self.mounted_lifespans: Mapping[object, Any] = mounted_lifespans or {}
        self.sealer = sealer
        self.thread_limiter = thread_limiter
        #: The same threads shared out among principals (``threads.limiter_for(principal)``).
        self.threads = ThreadShares(thread_limiter, threads_per_principal)
        self.bus = bus if bus is not None else SubscriptionBus()
        self.backend: Backend = backend if backend is not None else MemoryBackend()
        # Events for the other workers, sent in order by ``relay_events`` (shared backends).
        self._outbox: trio.MemorySendChannel[BusEvent] | None = None
        self.draining = trio.Event()
        self.max_background = max_background
        self._background = Shares(
            max_background,
            max_background_per_principal,
            "max_background_tasks",
            "Too much background work running",
        )
        self._services: dict[str, object] = {}
        #: The older era's sessions of this run; None when the server serves 2026-07-28 only.
        self.sessions: RunSessions | None = None
        self._token = trio.lowlevel.current_trio_token()

    # ------------------------------------------------------------------ services

    def add_service(self, extension_id: str, service: object) -> None:
        if extension_id in self._services:
            raise RuntimeError(f"extension {extension_id!r} already has a service in this run")
        self._services[extension_id] = service

    @overload
    def service(self, extension: ServiceProvider[_S]) -> _S: ...

    @overload
    def service(self, extension: str) -> Any: ...

    def service(self, extension: ServiceProvider[Any] | str) -> Any:
        """The service ``extension`` (or its id) started for this run (``Extension.serve``),
        typed as what that extension's ``serve`` reports started."""
        extension_id = extension if isinstance(extension, str) else extension.id
        try:
            return self._services[extension_id]
        except KeyError:
            raise InternalError(f"Extension {extension_id} is not running") from None

    @property
    def services(self) -> Mapping[str, object]:
        return self._services

    def backend_health(self) -> BackendHealth:
        """Whether this run's backend works now: ``healthy``, or why not (``reason``, one
        line naming no file or host). The memory backend always is; a shared one is not
        while its heartbeat or its signal loop fails, and is again once they succeed. For
        tests and a health endpoint: requests carry on either way."""
        return self.backend.health()

    # ------------------------------------------------------------------ notifications

    def publish(self, event: BusEvent) -> int:
        """Fan ``event`` out to this run's matching listen streams; returns how many.

        Safe from any thread: a sync handler running in a worker thread (or a thread of your
        own) may announce changes too; the fan-out itself always happens in the run's thread.
        """
        if not trio.lowlevel.in_trio_task():
            return trio.from_thread.run_sync(self.publish, event, trio_token=self._token)
        if self._outbox is not None:
            try:
                self._outbox.send_nowait(event)
            except trio.BrokenResourceError:
                pass  # the run is ending: the relay has stopped
            except (trio.WouldBlock, trio.ClosedResourceError):
                logger.warning(
                    "the other workers missed a %s: too many events queued", event.method
                )
        return self.bus.publish(event)

    async def relay_events(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Carry this worker's events to the other workers' listen streams, and theirs to
        this worker's bus, for the whole run (a shared backend only). Events leave in the
        order they were published, in batches; a failing backend loses the batch (logged),
        never the run."""
        send, receive = trio.open_memory_channel[BusEvent](RELAY_BUFFER)
        self.backend.on_broadcast(BUS_TOPIC, self._from_other_workers)
        self._outbox = send
        task_status.started()
        async with receive:
            while True:
                batch = [await receive.receive()]
                while len(batch) < RELAY_BATCH:
                    try:
                        batch.append(receive.receive_nowait())
                    except trio.WouldBlock:
                        break
                with error_boundary("sending events to the other workers", logger):
                    try:
                        await self.backend.broadcast(
                            BUS_TOPIC, {"events": [_plain(e) for e in batch]}
                        )
                    except ServiceUnavailable:  # the backend said so once, without a trace
                        logger.warning("%d events did not reach the other workers", len(batch))

    def _from_other_workers(self, body: Mapping[str, Any]) -> None:
        for event in body["events"]:
            self.bus.publish(
                BusEvent(event["method"], event["params"], event["key"], event.get("value"))
            )

    def notify_tools_changed(self) -> int:
        """Tell every listener that asked for it that the tool list changed."""
        return self.publish(flag_event("notifications/tools/list_changed", "toolsListChanged"))

    def notify_prompts_changed(self) -> int:
        return self.publish(flag_event("notifications/prompts/list_changed", "promptsListChanged"))

    def notify_resources_changed(self) -> int:
        return self.publish(
            flag_event("notifications/resources/list_changed", "resourcesListChanged")
        )

    def notify_resource_updated(self, uri: str) -> int:
        """Tell the listeners subscribed to ``uri`` (or a parent of it) that it changed."""
        return self.publish(resource_updated_event(uri))

    # ------------------------------------------------------------------ background work

    def start_background(
        self,
        fn: Callable[..., Awaitable[object]],
        *args: Any,
        name: str | None = None,
        principal: str | None = None,
    ) -> None:
        """Run ``fn(*args)`` in this run's background nursery, after the request that started
        it has answered: owned by the run, cancelled at shutdown, behind an error boundary
        (an error is logged, it stops nothing else), and bounded: ``CapacityExceeded`` once
        ``max_background`` such tasks are running (``max_background_tasks``), or
        ``principal`` runs its share of them (``max_background_tasks_per_principal``; None,
        the server's own work, counts in the total only). Safe from a sync tool's worker
        thread.
        """
        if not trio.lowlevel.in_trio_task():
            trio.from_thread.run_sync(
                lambda: self.start_background(fn, *args, name=name, principal=principal),
                trio_token=self._token,
            )
            return
        self._background.take(principal)
        label = str(name or getattr(fn, "__qualname__", repr(fn)))
        work = partial(self._background_work, fn, args, label, principal)
        try:
            self._nursery.start_soon(work, name=label)
        except BaseException:  # the nursery is closed: nothing runs, nothing is held
            self._background.give_back(principal)
            raise

    @property
    def background_count(self) -> int:
        """How much background work is running now."""
        return self._background.total

    async def _background_work(
        self,
        fn: Callable[..., Awaitable[object]],
        args: tuple[Any, ...],
        label: str,
        principal: str | None,
    ) -> None:
        try:
            with error_boundary(f"background task {label}"):
                await fn(*args)
        finally:
            self._background.give_back(principal)

    # ------------------------------------------------------------------ the event loop

    async def watch_event_loop(self, threshold: float) -> None:
        """Log once per episode when the event loop was blocked for ``threshold`` seconds or
        more: some handler did blocking or CPU-bound work without awaiting, and every other
        request, task and keep-alive waited for it. Runs for the whole run.

        It wakes every quarter of ``threshold``: a block lasting ``threshold`` makes it wake
        at least three quarters of that late, whenever in its period the block began.
        """
        period = threshold / 4
        blocked = False
        while True:
            before = trio.current_time()
            await trio.sleep(period)
            late = trio.current_time() - before - period
            if late + period < threshold:
                blocked = False
            elif not blocked:
                blocked = True
                logger.warning(
                    "the event loop was blocked for at least %.2f s: a handler did blocking or "
                    "CPU-bound work without awaiting (write such a tool as a plain def: it "
                    "runs in a worker thread)",
                    late,
                )

    # ------------------------------------------------------------------ shutdown

    def begin_draining(self) -> None:
        """The first step of shutdown: listen streams end now with their final result, and
        extensions stop admitting new work (new tasks are refused, retryable). Requests in
        flight carry on. Idempotent; ``Server.open_runtime`` calls it on the way out."""
        if not self.draining.is_set():
            self.draining.set()
            self.bus.close()
