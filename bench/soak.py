"""Soak run of the Tasks extension over real HTTP: many clients, thousands of mixed tasks.

Starts ``bench/soak_app.py`` under ``python -m hypercorn --worker-class trio``, records the
worker's RSS and open fds, then runs ``--clients`` concurrent clients (trio tasks, each with
its own keep-alive HTTP/1.1 connections, h11 on trio sockets) through ``--tasks`` tasks of five
kinds: completing, failing, cancelled, parked-and-answered and parked-and-expired (its TTL
runs out; ``tasks/get`` then answers -32602). A few clients follow their tasks on
``subscriptions/listen`` streams. Every task's observations are checked at the end: none lost,
none stuck, none seen in two terminal statuses, each ending the way its client drove it; the
runner, store and bus are empty again, fds are back to baseline, and the server log has no
traceback. RSS growth is reported (not asserted), with the worker's live objects by type
before and after, which tell a leak from allocator high-water; ``--rounds N`` repeats the
whole pass on the same server to show whether RSS keeps growing. The exit status is 1 on any
violation. Not a test (pytest never collects it): run it by hand; see bench/SOAK.md.

    PYTHONPATH=. .venv/bin/python bench/soak.py --tasks 2000 --clients 50 --seed 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import h11
import trio

from presa_trio.ext.tasks._reapers import REAP_GRACE_MS

ROOT = Path(__file__).resolve().parent.parent
VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}},
}
UNKNOWN_CODE = -32602
UNKNOWN_MESSAGE = "Unknown or inaccessible taskId"
TERMINAL = frozenset({"completed", "failed", "cancelled"})

#: What each kind of task ends as, seen by its client.
KINDS = ("completed", "failed", "cancelled", "answered", "expired")
EXPECTED = {
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "answered": "completed",
    "expired": "expired",
}
#: What a listen stream must see as the task's terminal notification.
NOTIFIED = {**EXPECTED, "expired": "failed"}
WEIGHTS = (30, 15, 20, 20, 15)

REQUEST_TIMEOUT = 30.0  # bound on one HTTP exchange
IDLE_RECONNECT = 2.0  # hypercorn closes idle keep-alive connections after 5 s
FOLLOW_MS = 1500  # how long followed completing/failing tasks work (past the listen ack)
NOTIFY_GRACE = 2.0  # how long a listen stream may lag behind tasks/get
# hypercorn's trio worker keeps a connection's socket open (CLOSE-WAIT) for up to its
# keep_alive_timeout (5 s) after the client closed it: fds are counted after longer quiet.
QUIET_SECONDS = 6.5


class TransportError(Exception):
    """An HTTP exchange that did not end with a JSON-RPC message."""


# ---------------------------------------------------------------------- wire


def request_body(method: str, params: dict[str, Any], request_id: int) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    message["params"] = {**params, "_meta": META}
    return json.dumps(message, separators=(",", ":")).encode()


def request_headers(port: int, method: str, name: str | None, size: int) -> list[tuple[str, str]]:
    headers = [
        ("host", f"127.0.0.1:{port}"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", VERSION),
        ("mcp-method", method),
        ("content-length", str(size)),
    ]
    if name is not None:
        headers.append(("mcp-name", name))
    return headers


def sse_messages(payload: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in payload.split(b"\n") if line.startswith(b"data:")]


@dataclass
class Meter:
    """Every HTTP exchange of the soak: how many, how long, and which failed."""

    requests: int = 0
    latencies: list[float] = field(default_factory=list)
    transport_errors: list[str] = field(default_factory=list)
    methods: Counter[str] = field(default_factory=Counter)
    connections: int = 0
    next_id: int = 0

    def request_id(self) -> int:
        self.next_id += 1
        return self.next_id


class Http:
    """One keep-alive HTTP/1.1 connection of one client (reopened when the server closed it,
    or before a reuse after a long idle spell, never retried mid-request)."""

    def __init__(self, port: int, meter: Meter) -> None:
        self.port = port
        self.meter = meter
        self.stream: trio.SocketStream | None = None
        self.conn: h11.Connection | None = None
        self.last_used = 0.0

    async def aclose(self) -> None:
        if self.stream is not None:
            stream, self.stream, self.conn = self.stream, None, None
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _ready(self) -> tuple[trio.SocketStream, h11.Connection]:
        stale = time.monotonic() - self.last_used > IDLE_RECONNECT
        if self.stream is None or self.conn is None or self.conn.our_state is not h11.IDLE or stale:
            await self.aclose()
            self.stream = await trio.open_tcp_stream("127.0.0.1", self.port)
            self.conn = h11.Connection(h11.CLIENT)
            self.meter.connections += 1
        return self.stream, self.conn

    async def rpc(
        self, method: str, params: dict[str, Any], name: str | None = None
    ) -> dict[str, Any]:
        """The final JSON-RPC message answering ``method`` (a result or an error)."""
        body = request_body(method, params, self.meter.request_id())
        headers = request_headers(self.port, method, name, len(body))
        self.meter.requests += 1
        self.meter.methods[method] += 1
        started = time.monotonic()
        try:
            with trio.fail_after(REQUEST_TIMEOUT):
                stream, conn = await self._ready()
                out = conn.send(h11.Request(method="POST", target="/mcp", headers=headers))
                out += conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
                await stream.send_all(out)
                status, content_type, payload = await self._response(stream, conn)
        except (OSError, trio.TooSlowError, trio.BrokenResourceError, h11.ProtocolError) as exc:
            await self.aclose()
            note = f"{method} {name}: {type(exc).__name__}: {exc}"
            self.meter.transport_errors.append(note)
            raise TransportError(note) from exc
        self.last_used = time.monotonic()
        self.meter.latencies.append(self.last_used - started)
        messages: list[dict[str, Any]]
        if content_type.startswith("application/json"):
            messages = [json.loads(payload)]
        elif content_type.startswith("text/event-stream"):
            messages = sse_messages(payload)
        else:
            messages = []
        if not messages or not ("result" in messages[-1] or "error" in messages[-1]):
            note = f"{method} {name}: HTTP {status} {content_type!r} {payload[:200]!r}"
            self.meter.transport_errors.append(note)
            raise TransportError(note)
        return messages[-1]

    async def _response(
        self, stream: trio.SocketStream, conn: h11.Connection
    ) -> tuple[int, str, bytes]:
        status, content_type, chunks = 0, "", []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    raise trio.BrokenResourceError("the server closed the connection")
                conn.receive_data(data)
            elif isinstance(event, h11.Response):
                status = event.status_code
                content_type = dict(event.headers).get(b"content-type", b"").decode()
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise trio.BrokenResourceError("the server closed the connection")
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:
            await self.aclose()
        return status, content_type, b"".join(chunks)


class ListenStream:
    """One ``subscriptions/listen`` stream on a connection of its own (SSE, read as it comes)."""

    def __init__(self, port: int, meter: Meter) -> None:
        self.port = port
        self.meter = meter
        self.stream: trio.SocketStream | None = None
        self.conn = h11.Connection(h11.CLIENT)
        self.buffer = b""

    async def open(self, task_ids: list[str]) -> dict[str, Any]:
        """Send the listen request; returns the acknowledgement notification."""
        params = {"notifications": {"taskIds": task_ids}}
        body = request_body("subscriptions/listen", params, self.meter.request_id())
        headers = request_headers(self.port, "subscriptions/listen", None, len(body))
        self.meter.requests += 1
        self.meter.methods["subscriptions/listen"] += 1
        self.meter.connections += 1
        self.stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        out = self.conn.send(h11.Request(method="POST", target="/mcp", headers=headers))
        out += self.conn.send(h11.Data(data=body)) + self.conn.send(h11.EndOfMessage())
        await self.stream.send_all(out)
        event = await self._event()
        if not isinstance(event, h11.Response) or event.status_code != 200:
            raise TransportError(f"subscriptions/listen answered {event!r}")
        return await self.next_message()

    async def _event(self) -> Any:
        assert self.stream is not None
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await self.stream.receive_some(65536)
            if not data:
                raise EOFError
            self.conn.receive_data(data)

    async def next_message(self) -> dict[str, Any]:
        """The next ``data:`` event (keepalive comments skipped); EOFError at the end."""
        while True:
            while b"\n\n" not in self.buffer:
                event = await self._event()
                if not isinstance(event, h11.Data):
                    raise EOFError
                self.buffer += bytes(event.data)
            frame, self.buffer = self.buffer.split(b"\n\n", 1)
            for line in frame.split(b"\n"):
                if line.startswith(b"data:"):
                    message: dict[str, Any] = json.loads(line[5:])
                    return message

    async def aclose(self) -> None:
        if self.stream is not None:
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            self.stream = None


# ---------------------------------------------------------------------- what each task did


def epoch_ms(stamp: str) -> int:
    """``2026-12-03T09:54:51.179Z`` as epoch milliseconds."""
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return round(parsed.timestamp() * 1000)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Plan:
    index: int
    kind: str
    client: int
    ms: int = 0  # work time of completing/failing tasks
    cancel_delay_ms: int = 0  # how long a cancelled task runs before tasks/cancel
    followed: bool = False


@dataclass
class Obs:
    """What the client of one task did and saw."""

    plan: Plan
    task_id: str | None = None
    created_ms: int = 0  # the server's createdAt
    ttl_ms: int = 0
    seen: list[str] = field(default_factory=list)  # statuses from tasks/get, repeats collapsed
    final: str | None = None  # terminal status, "expired", or None (never observed)
    final_at_ms: int = 0
    last_updated_ms: int = 0  # the server's lastUpdatedAt of the terminal observation
    confirm: str | None = None  # the re-read right after the terminal observation
    late: str | None = None  # the re-read at the end of the run
    notified: list[str] = field(default_factory=list)  # statuses from a listen stream
    ack_ms: int = 0  # when the listen stream that followed it was acknowledged
    problems: list[str] = field(default_factory=list)

    def see(self, status: str) -> None:
        if not self.seen or self.seen[-1] != status:
            self.seen.append(status)
        if self.final is not None and status != self.final:  # the confirm re-read saw change
            self.problems.append(f"double-terminal: {self.final} then {status}")


def is_unknown(message: dict[str, Any]) -> bool:
    error = message.get("error")
    return (
        isinstance(error, dict)
        and error.get("code") == UNKNOWN_CODE
        and error.get("message") == UNKNOWN_MESSAGE
    )


def tool_text(result: dict[str, Any]) -> str | None:
    content = result.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None


class Driver:
    """Drives tasks of every kind for one client, on one connection of the client's."""

    def __init__(self, http: Http, ttl_ms: int) -> None:
        self.http = http
        self.ttl_ms = ttl_ms

    async def create(self, obs: Obs) -> bool:
        plan = obs.plan
        if plan.kind in ("completed", "failed"):
            name = "complete" if plan.kind == "completed" else "fail"
            arguments: dict[str, Any] = {"ms": plan.ms}
        elif plan.kind == "cancelled":
            name, arguments = "sleep_forever", {}
        else:
            name, arguments = "park", {"key": f"k{plan.index}"}
        message = await self.http.rpc("tools/call", {"name": name, "arguments": arguments}, name)
        result = message.get("result")
        if not isinstance(result, dict) or result.get("resultType") != "task":
            obs.problems.append(f"create: not a task: {json.dumps(message)[:300]}")
            return False
        obs.task_id = result["taskId"]
        obs.created_ms = epoch_ms(result["createdAt"])
        obs.ttl_ms = result["ttlMs"]
        obs.see(result["status"])
        return True

    async def get(self, obs: Obs) -> dict[str, Any]:
        assert obs.task_id is not None
        return await self.http.rpc("tasks/get", {"taskId": obs.task_id}, obs.task_id)

    async def poll(self, obs: Obs, until: frozenset[str]) -> dict[str, Any] | None:
        """tasks/get at the task's poll interval until a status in ``until`` (or terminal);
        None when the task became unknown (its TTL ran out, or it was lost)."""
        while True:
            message = await self.get(obs)
            if is_unknown(message):
                return None
            result = message.get("result")
            if not isinstance(result, dict) or "status" not in result:
                obs.problems.append(f"tasks/get: unexpected answer {json.dumps(message)[:300]}")
                return None
            obs.see(result["status"])
            if result["status"] in until or result["status"] in TERMINAL:
                return result
            await trio.sleep(result.get("pollIntervalMs", 50) / 1000)

    def gone(self, obs: Obs) -> None:
        """The task became unknown before its client saw it end."""
        age = now_ms() - obs.created_ms
        last = obs.seen[-1] if obs.seen else None
        if age < obs.ttl_ms:
            obs.problems.append(f"lost: unknown at {age} ms, before its TTL; last seen {last}")
        else:
            obs.problems.append(f"stuck: still {last} when its TTL ran out ({age} ms)")

    async def finish(self, obs: Obs, result: dict[str, Any] | None) -> None:
        """Record the terminal observation, check it, and re-read it once at once."""
        if result is None:
            self.gone(obs)
            return
        status = result["status"]
        obs.final = status
        obs.final_at_ms = now_ms()
        obs.last_updated_ms = epoch_ms(result["lastUpdatedAt"])
        self.check_payload(obs, result)
        again = await self.get(obs)
        if is_unknown(again):
            obs.confirm = "unknown"
            if now_ms() - obs.created_ms < obs.ttl_ms:
                obs.problems.append("lost: unknown right after its terminal status, before TTL")
            return
        confirm = again.get("result", {})
        obs.confirm = confirm.get("status")
        obs.see(obs.confirm or "?")
        if confirm.get("result") != result.get("result") or confirm.get("error") != result.get(
            "error"
        ):
            obs.problems.append("double-terminal: its result changed on the re-read")

    def check_payload(self, obs: Obs, result: dict[str, Any]) -> None:
        plan = obs.plan
        status = result["status"]
        if plan.kind == "completed" and status == "completed":
            text = tool_text(result.get("result", {}))
            if text != f"done {plan.ms}":
                obs.problems.append(f"wrong result {text!r}")
        elif plan.kind == "answered" and status == "completed":
            text = tool_text(result.get("result", {}))
            if text != f"x{plan.index}":
                obs.problems.append(f"wrong answer echoed {text!r}")
        elif plan.kind == "failed" and status == "failed":
            error = result.get("error", {})
            if error.get("code") != -32603 or error.get("message") != "soak failure":
                obs.problems.append(f"wrong error {error!r}")

    async def drive(self, obs: Obs) -> None:
        """Take a created task to its end, the way its kind says."""
        kind = obs.plan.kind
        if kind in ("completed", "failed"):
            await self.finish(obs, await self.poll(obs, TERMINAL))
        elif kind == "cancelled":
            await self.cancel(obs)
        elif kind == "answered":
            await self.answer(obs)
        else:
            await self.expire(obs)

    async def cancel(self, obs: Obs) -> None:
        assert obs.task_id is not None
        if obs.plan.cancel_delay_ms:
            await trio.sleep(obs.plan.cancel_delay_ms / 1000)
        message = await self.http.rpc("tasks/cancel", {"taskId": obs.task_id}, obs.task_id)
        if "result" not in message:
            obs.problems.append(f"tasks/cancel: {json.dumps(message)[:300]}")
        first = await self.get(obs)  # tasks/cancel commits "cancelled" before it answers
        status = first.get("result", {}).get("status")
        if status != "cancelled":
            obs.problems.append(f"not cancelled at once after tasks/cancel: {status}")
        await self.finish(obs, await self.poll(obs, TERMINAL))

    async def parked(self, obs: Obs) -> dict[str, Any] | None:
        result = await self.poll(obs, frozenset({"input_required"}))
        if result is None or result["status"] != "input_required":
            return result
        key = f"k{obs.plan.index}"
        if key not in result.get("inputRequests", {}):
            obs.problems.append(f"input_required without {key}: {result.get('inputRequests')}")
        return result

    async def answer(self, obs: Obs) -> None:
        assert obs.task_id is not None
        result = await self.parked(obs)
        if result is None or result["status"] != "input_required":
            await self.finish(obs, result)
            return
        key = f"k{obs.plan.index}"
        answer = {key: {"action": "accept", "content": {"v": f"x{obs.plan.index}"}}}
        params = {"taskId": obs.task_id, "inputResponses": answer}
        message = await self.http.rpc("tasks/update", params, obs.task_id)
        acknowledged = message.get("result")
        # (an answer the task did not take is acknowledged too: the poll below tells)
        if not isinstance(acknowledged, dict) or acknowledged.get("resultType") != "complete":
            obs.problems.append(f"tasks/update: {json.dumps(message)[:300]}")
        await self.finish(obs, await self.poll(obs, TERMINAL))

    async def expire(self, obs: Obs) -> None:
        """Park, never answer: the task must stay input_required until its TTL, then be
        unknown (its terminal observation), within a short while after it."""
        result = await self.parked(obs)
        if result is None or result["status"] != "input_required":
            obs.problems.append(f"never parked: {obs.seen}")
            await self.finish(obs, result)
            return
        end = obs.created_ms + obs.ttl_ms
        while True:
            left = end - now_ms()
            await trio.sleep(min(0.5, left / 1000) if left > 300 else 0.1)
            message = await self.get(obs)
            at = now_ms()
            if is_unknown(message):
                if at < end - 20:  # 20 ms: the server's and our wall clocks read apart
                    obs.problems.append(f"lost: unknown {end - at} ms before its TTL")
                obs.final, obs.final_at_ms = "expired", at
                confirm = await self.get(obs)
                obs.confirm = "unknown" if is_unknown(confirm) else json.dumps(confirm)[:200]
                if obs.confirm != "unknown":
                    obs.problems.append(f"expired, then visible again: {obs.confirm}")
                return
            status = message.get("result", {}).get("status")
            obs.see(status or "?")
            if status != "input_required":
                obs.problems.append(f"parked task became {status} before its TTL")
            if at > end + 3000:
                obs.problems.append(f"stuck: still {status} {at - end} ms after its TTL")
                return


# ---------------------------------------------------------------------- clients


@dataclass
class Soak:
    port: int
    ttl_ms: int
    meter: Meter
    observations: list[Obs]
    streams: int = 0
    stream_problems: list[str] = field(default_factory=list)


async def run_client(soak: Soak, mine: list[Obs], group: int) -> None:
    """One client: its tasks one after another, or (a following client) in groups of
    ``group`` driven together while one listen stream follows them."""
    http = Http(soak.port, soak.meter)
    try:
        if not mine or not mine[0].plan.followed:
            driver = Driver(http, soak.ttl_ms)
            for obs in mine:
                await one_task(driver, obs)
        else:
            for start in range(0, len(mine), group):
                await followed_group(soak, http, mine[start : start + group])
    finally:
        await http.aclose()


async def one_task(driver: Driver, obs: Obs) -> None:
    try:
        if await driver.create(obs):
            await driver.drive(obs)
    except TransportError as exc:
        obs.problems.append(f"transport: {exc}")


async def followed_group(soak: Soak, http: Http, group: list[Obs]) -> None:
    """Create the group's tasks, follow them on one listen stream, drive them together, and
    check that the stream told each task's end (once, and the same end tasks/get told)."""
    creator = Driver(http, soak.ttl_ms)
    created = []
    for obs in group:
        try:
            if await creator.create(obs):
                created.append(obs)
        except TransportError as exc:
            obs.problems.append(f"transport: {exc}")
    if not created:
        return
    by_id = {obs.task_id: obs for obs in created if obs.task_id is not None}
    listen = ListenStream(soak.port, soak.meter)
    soak.streams += 1
    try:
        with trio.fail_after(REQUEST_TIMEOUT):
            ack = await listen.open(list(by_id))
        ack_ms = now_ms()
        agreed = ack.get("params", {}).get("notifications", {}).get("taskIds")
        if ack.get("method") != "notifications/subscriptions/acknowledged" or sorted(
            agreed or []
        ) != sorted(by_id):
            soak.stream_problems.append(f"listen ack: {json.dumps(ack)[:300]}")
        for obs in created:
            obs.ack_ms = ack_ms

        caught_up = trio.Event()  # every task's expected end was notified

        async def collect() -> None:
            while True:
                message = await listen.next_message()
                if message.get("method") != "notifications/tasks":
                    soak.stream_problems.append(f"listen stream: {json.dumps(message)[:300]}")
                    continue
                params = message.get("params", {})
                obs = by_id.get(params.get("taskId"))
                if obs is None:
                    soak.stream_problems.append(f"notification for another task: {params}")
                else:
                    obs.notified.append(params.get("status"))
                if all(NOTIFIED[o.plan.kind] in o.notified for o in created):
                    caught_up.set()

        async def drive(obs: Obs) -> None:
            own = Http(soak.port, soak.meter)  # each concurrent driver: its own connection
            try:
                await Driver(own, soak.ttl_ms).drive(obs)
            except TransportError as exc:
                obs.problems.append(f"transport: {exc}")
            finally:
                await own.aclose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect)
            async with trio.open_nursery() as drivers:
                for obs in created:
                    drivers.start_soon(drive, obs)
            with trio.move_on_after(NOTIFY_GRACE):  # let the stream catch up with tasks/get
                await caught_up.wait()
            nursery.cancel_scope.cancel()
    except (EOFError, OSError, TransportError, trio.TooSlowError, h11.ProtocolError) as exc:
        soak.stream_problems.append(f"listen stream failed: {type(exc).__name__}: {exc}")
    finally:
        await listen.aclose()


async def late_reread(soak: Soak, parallel: int) -> None:
    """Re-read every task once more: a terminal one must show the same status, or be
    unknown only once its TTL is over."""
    pending = [o for o in soak.observations if o.task_id is not None]
    limiter = trio.CapacityLimiter(parallel)

    async def reread(http: Http, obs: Obs) -> None:
        async with limiter:
            try:
                message = await Driver(http, soak.ttl_ms).get(obs)
            except TransportError as exc:
                obs.problems.append(f"transport: {exc}")
                return
        at = now_ms()
        if is_unknown(message):
            obs.late = "unknown"
            if at < obs.created_ms + obs.ttl_ms - 20:
                obs.problems.append(f"lost: unknown at the end, {at - obs.created_ms} ms old")
            return
        obs.late = message.get("result", {}).get("status")
        if obs.final in TERMINAL and obs.late != obs.final:
            obs.problems.append(f"double-terminal: {obs.final}, at the end {obs.late}")
        elif obs.final == "expired":
            obs.problems.append(f"expired, then visible again at the end: {obs.late}")
        elif obs.final is None and obs.late not in TERMINAL:
            obs.problems.append(f"stuck: {obs.late} at the end")

    async def worker(chunk: list[Obs]) -> None:
        http = Http(soak.port, soak.meter)
        try:
            for obs in chunk:
                await reread(http, obs)
        finally:
            await http.aclose()

    async with trio.open_nursery() as nursery:
        for i in range(parallel):
            nursery.start_soon(worker, pending[i::parallel])


async def stats(port: int, meter: Meter, tool: str = "stats") -> dict[str, int]:
    """The counts a plain (non-task) tool of the soak app returns: ``stats`` or ``objects``."""
    http = Http(port, meter)
    try:
        message = await http.rpc("tools/call", {"name": tool, "arguments": {}}, tool)
    finally:
        await http.aclose()
    text = tool_text(message.get("result", {}))
    if text is None:
        raise TransportError(f"{tool}: {message}")
    counts: dict[str, int] = json.loads(text)
    return counts


# ---------------------------------------------------------------------- the server


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    worker: int = 0

    def log(self) -> str:
        return self.log_path.read_bytes().decode(errors="replace")


def pool_fds(url: str) -> int:
    """The fds a store's connections hold at most (its pool, and the writer's, the
    updater's and the reader's lanes, each opened at its first batch): connections still
    opening when the baseline is taken are not a leak."""
    scheme = url.split(":", 1)[0]
    if scheme == "sqlite":
        from presa_trio._backends import sqlite as _sqlite

        # each connection holds the file and its WAL open; the writer and the reader: 2 more
        return 2 * (_sqlite.POOL_SIZE + 2)
    if scheme in ("postgresql", "postgres"):
        from presa_trio._backends import postgres as _postgres

        return _postgres.POOL_SIZE + 3 * _postgres.LANES  # a socket each
    return 0


def display_store(url: str) -> str:
    """``url`` without its query (a password may sit there)."""
    return url.split("?", 1)[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(
    port: int, log_path: Path, ttl_ms: int, reap_seconds: float, store: str
) -> ServerProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["SOAK_TTL_MS"] = str(ttl_ms)
    env["SOAK_REAP_SECONDS"] = str(reap_seconds)
    env["PRESA_STORE"] = store
    command = [sys.executable, "-m", "hypercorn", "--worker-class", "trio"]
    command += ["--bind", f"127.0.0.1:{port}", "bench.soak_app:app"]
    with open(log_path, "ab") as log:  # a file, not a pipe: the server never blocks on it
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    return ServerProcess(process, port, log_path)


def wait_ready(server: ServerProcess, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=0.5).close()
            server.worker = worker_pid(server.process.pid)
            return
        except (OSError, LookupError):
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start:\n{server.log()}") from None
            time.sleep(0.05)


def worker_pid(master: int) -> int:
    """hypercorn's worker: the master's child running multiprocessing's ``spawn_main``
    (its other child is multiprocessing's resource tracker)."""
    for children in Path(f"/proc/{master}/task").glob("*/children"):
        for child in children.read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"spawn_main" in cmdline:
                return int(child)
    raise LookupError("no hypercorn worker yet")


def stop_server(server: ServerProcess, bound: float = 10.0) -> int | None:
    """SIGTERM to the server's process group, SIGKILL after ``bound`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.process.pid, sig)
        except ProcessLookupError:
            break
        try:
            return server.process.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            print(f"# the server did not stop within {bound} s of {sig.name}", file=sys.stderr)
    return server.process.poll()


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise LookupError("no VmRSS")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_kinds(pid: int) -> dict[str, int]:
    """The worker's open fds by kind (socket, pipe, anon_inode:[eventpoll], a path...)."""
    kinds: Counter[str] = Counter()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kinds[target.split(":[")[0] if target.startswith(("socket:", "pipe:")) else target] += 1
    return dict(sorted(kinds.items()))


def log_lines(server: ServerProcess, word: str) -> list[str]:
    return [line for line in server.log().splitlines() if word in line]


# ---------------------------------------------------------------------- the soak


def make_plan(args: argparse.Namespace, seed: int) -> list[Obs]:
    rng = random.Random(seed)
    observations = []
    for index in range(args.tasks):
        client = index % args.clients
        followed = client < args.listen_clients
        kind = rng.choices(KINDS, WEIGHTS)[0]
        plan = Plan(index, kind, client, followed=followed)
        if kind in ("completed", "failed"):
            plan.ms = FOLLOW_MS if followed else rng.randint(10, 400)
        if kind == "cancelled":
            plan.cancel_delay_ms = rng.choice((0, 0, rng.randint(1, 200)))
        observations.append(Obs(plan))
    return observations


async def warm_up(port: int, ttl_ms: int, meter: Meter) -> list[Obs]:
    """One task of each quick kind, so lazy first-use costs are in the baseline."""
    warm = [Obs(Plan(-1 - i, kind, -1, ms=20)) for i, kind in enumerate(KINDS[:4])]
    http = Http(port, meter)
    try:
        for obs in warm:
            await one_task(Driver(http, ttl_ms), obs)
    finally:
        await http.aclose()
    await stats(port, meter)
    return warm


def sample(worker: int) -> tuple[int, int]:
    return rss_kb(worker), fd_count(worker)


@dataclass
class Round:
    """One pass of every client through ``--tasks`` tasks, then a settle."""

    number: int
    soak: Soak
    elapsed: float = 0.0
    requests: int = 0
    latencies: list[float] = field(default_factory=list)
    reread_requests: int = 0
    stats_end: dict[str, int] = field(default_factory=dict)
    stats_settled: dict[str, int] = field(default_factory=dict)
    rss_peak: int = 0
    fd_peak: int = 0
    rss_after: int = 0
    fd_after: int = 0
    fds_after: dict[str, int] = field(default_factory=dict)
    objects_after: dict[str, int] = field(default_factory=dict)


async def soak_round(
    args: argparse.Namespace, server: ServerProcess, number: int, meter: Meter
) -> Round:
    observations = make_plan(args, args.seed + number)
    result = Round(number, Soak(server.port, args.ttl_ms, Meter(), observations))
    soak = result.soak
    per_client: dict[int, list[Obs]] = defaultdict(list)
    for obs in observations:
        per_client[obs.plan.client].append(obs)

    async def watch() -> None:
        while True:
            rss, fds = sample(server.worker)
            result.rss_peak, result.fd_peak = max(result.rss_peak, rss), max(result.fd_peak, fds)
            await trio.sleep(0.25)

    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        async with trio.open_nursery() as clients:
            for client in range(args.clients):
                clients.start_soon(run_client, soak, per_client[client], args.group)
        result.elapsed = time.monotonic() - started
        result.requests = soak.meter.requests
        result.latencies = list(soak.meter.latencies)
        result.stats_end = await stats(server.port, meter)
        await late_reread(soak, args.clients)
        result.reread_requests = soak.meter.requests - result.requests
        nursery.cancel_scope.cancel()

    # Settle: every record's TTL over and reaped, nothing live; then sample. The reaper
    # deletes a record REAP_GRACE_MS after its TTL (at its next pass), not at the TTL.
    newest = max((o.created_ms + o.ttl_ms for o in observations if o.task_id), default=0)
    reaped = newest + REAP_GRACE_MS + args.reap_seconds * 1000
    await trio.sleep(max(0, reaped - now_ms()) / 1000 + 2.5)
    deadline = trio.current_time() + args.settle
    while True:
        counts = await stats(server.port, meter)
        if not any(counts.values()) or trio.current_time() > deadline:
            break
        await trio.sleep(0.5)
    result.stats_settled = counts
    await trio.sleep(args.settle)
    result.rss_after, result.fd_after = sample(server.worker)
    result.fds_after = fd_kinds(server.worker)
    # After the quiet spell, so that no connection of the stats polls is still open.
    result.objects_after = await stats(server.port, meter, "objects")
    return result


async def soak_main(args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
    report: dict[str, Any] = {}
    meter = Meter()
    report["rss_start"], report["fd_start"] = sample(server.worker)
    report["fds_start"] = fd_kinds(server.worker)
    warm = await warm_up(server.port, args.ttl_ms, meter)
    report["warm_problems"] = [f"warm-up {o.plan.kind}: {p}" for o in warm for p in o.problems]
    await trio.sleep(QUIET_SECONDS)
    report["rss_base"], report["fd_base"] = sample(server.worker)
    report["fds_base"] = fd_kinds(server.worker)
    report["objects_base"] = await stats(server.port, meter, "objects")
    report["stats_base"] = await stats(server.port, meter)
    rounds = []
    for number in range(args.rounds):
        rounds.append(await soak_round(args, server, number, meter))
        last = rounds[-1]
        print(
            f"# round {number + 1}/{args.rounds}: {last.elapsed:.1f} s, {last.requests} requests, "
            f"RSS after {last.rss_after} KB, fds after {last.fd_after}",
            flush=True,
        )
    report["rounds"] = rounds
    report["warm_meter"] = meter
    return report


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def notification_problems(obs: Obs) -> list[str]:
    """A followed task's stream: one terminal notification at most, nothing after it, and the
    end tasks/get told (missing only if the task ended before the stream was acknowledged)."""
    problems = []
    terminal = [s for s in obs.notified if s in TERMINAL]
    if len(terminal) > 1:
        problems.append(f"double-terminal on the listen stream: {obs.notified}")
    if terminal and obs.notified[-1] not in TERMINAL:
        problems.append(f"notified after terminal: {obs.notified}")
    want = NOTIFIED[obs.plan.kind]
    if terminal and terminal[0] != want:
        problems.append(f"listen stream ended {terminal[0]}, expected {want}")
    if not terminal and obs.final is not None:
        ended_before_ack = obs.last_updated_ms and obs.last_updated_ms < obs.ack_ms
        if not ended_before_ack:
            problems.append(f"no terminal notification (saw {obs.notified})")
    return problems


def check_round(r: Round, violate: Callable[[str, str], None]) -> None:
    for obs in r.soak.observations:
        where = f"round {r.number + 1} task #{obs.plan.index} ({obs.plan.kind}, {obs.task_id})"
        problems = list(obs.problems)
        if obs.plan.followed and obs.task_id is not None:
            problems += notification_problems(obs)
        if obs.task_id is None:
            violate("lost", f"{where}: never created: {problems}")
        elif obs.final is None and not any(p.startswith(("lost", "stuck")) for p in problems):
            violate("stuck", f"{where}: no terminal observation; seen {obs.seen}")
        elif obs.final is not None and obs.final != EXPECTED[obs.plan.kind]:
            violate("mismatch", f"{where}: ended {obs.final}; seen {obs.seen}")
        for problem in problems:
            category = problem.split(":", 1)[0]
            if category not in ("lost", "stuck", "double-terminal", "transport"):
                category = "other"
            violate(category, f"{where}: {problem}")
    for problem in r.soak.stream_problems:
        violate("listen", f"round {r.number + 1}: {problem}")
    for name in ("live", "parked", "listeners", "stored"):
        if r.stats_settled.get(name) != 0:
            violate("leak", f"round {r.number + 1} settled: {name}={r.stats_settled.get(name)}")


def evaluate(args: argparse.Namespace, report: dict[str, Any], server: ServerProcess) -> int:
    rounds: list[Round] = report["rounds"]
    last = rounds[-1]
    observations = [o for r in rounds for o in r.soak.observations]
    violations: dict[str, list[str]] = defaultdict(list)

    def violate(kind: str, text: str) -> None:
        violations[kind].append(text)

    for r in rounds:
        check_round(r, violate)
    for problem in report["warm_problems"]:
        violate("other", problem)
    for note in report["warm_meter"].transport_errors:
        violate("transport", note)
    fd_growth = last.fd_after - report["fd_base"]
    if abs(fd_growth) > args.fd_slack:
        violate("leak", f"fds {report['fd_base']} -> {last.fd_after} (slack {args.fd_slack})")
    tracebacks = log_lines(server, "Traceback")
    if tracebacks:
        violate("traceback", f"{len(tracebacks)} 'Traceback' lines in {server.log_path}")

    print()
    print(f"{'kind':<11} {'planned':>8} {'created':>8} {'as-expected':>12}  expected end")
    totals = [0, 0, 0]
    for kind in KINDS:
        mine = [o for o in observations if o.plan.kind == kind]
        row = (
            len(mine),
            sum(o.task_id is not None for o in mine),
            sum(o.final == EXPECTED[kind] for o in mine),
        )
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        print(f"{kind:<11} {row[0]:>8} {row[1]:>8} {row[2]:>12}  {EXPECTED[kind]}")
    print(f"{'total':<11} {totals[0]:>8} {totals[1]:>8} {totals[2]:>12}")
    print()
    for label, values in (
        ("final observations: ", [o.final for o in observations]),
        ("re-read at once:    ", [o.confirm for o in observations]),
        ("re-read at the end: ", [o.late for o in observations]),
    ):
        print(f"{label} {dict(sorted(Counter(v or 'none' for v in values).items()))}")
    followed = [o for o in observations if o.plan.followed and o.task_id is not None]
    terminal_notes = sum(any(s in TERMINAL for s in o.notified) for o in followed)
    print(
        f"listen streams: {sum(r.soak.streams for r in rounds)}, following {len(followed)} "
        f"tasks; terminal notifications {terminal_notes}/{len(followed)}, "
        f"notifications {sum(len(o.notified) for o in followed)}"
    )
    print()
    print(
        f"clients {args.clients}, tasks {args.tasks} x {args.rounds} round(s), "
        f"seed {args.seed}, ttl {args.ttl_ms} ms, reap every {args.reap_seconds:g} s, "
        f"store {display_store(args.store)}"
    )
    print(
        f"{'round':>5} {'elapsed_s':>9} {'requests':>8} {'req/s':>6} {'conns':>6} "
        f"{'p50_ms':>7} {'p90_ms':>7} {'p99_ms':>7} {'max_ms':>7} "
        f"{'peak_KB':>8} {'after_KB':>8} {'peak_fd':>7} {'after_fd':>8}"
    )
    for r in rounds:
        lat = r.latencies
        print(
            f"{r.number + 1:>5} {r.elapsed:>9.1f} {r.requests:>8} {r.requests / r.elapsed:>6.0f} "
            f"{r.soak.meter.connections:>6} {percentile(lat, 0.5) * 1e3:>7.1f} "
            f"{percentile(lat, 0.9) * 1e3:>7.1f} {percentile(lat, 0.99) * 1e3:>7.1f} "
            f"{max(lat, default=0) * 1e3:>7.1f} {r.rss_peak:>8} {r.rss_after:>8} "
            f"{r.fd_peak:>7} {r.fd_after:>8}"
        )
    methods: Counter[str] = Counter()
    for r in rounds:
        methods.update(r.soak.meter.methods)
    print(f"requests by method (end re-reads included): {dict(sorted(methods.items()))}")
    print()
    rss_growth = last.rss_after - report["rss_base"]
    head = f"worker {server.worker}"
    print(f"{head:<16} {'start':>8} {'baseline':>9} {'after':>8}")
    print(
        f"{'RSS KB':<16} {report['rss_start']:>8} {report['rss_base']:>9} "
        f"{last.rss_after:>8}   growth {rss_growth:+d} KB"
    )
    print(
        f"{'open fds':<16} {report['fd_start']:>8} {report['fd_base']:>9} "
        f"{last.fd_after:>8}   growth {fd_growth:+d}"
    )
    print(f"fds by kind: start    {report['fds_start']}")
    print(f"             baseline {report['fds_base']}")
    print(f"             after    {last.fds_after}")
    base = report["objects_base"]
    print(
        "live objects (gc, after a collection): baseline "
        + ", ".join(f"{k} {base[k]}" for k in list(base)[:3])
    )
    for r in rounds:
        after = r.objects_after
        print(
            f"  after round {r.number + 1}: "
            + ", ".join(f"{k} {after[k]} ({after[k] - base[k]:+d})" for k in list(after)[:3])
        )
    grown = {k: v - base.get(k, 0) for k, v in last.objects_after.items() if k[:1] != "("}
    top = sorted(grown.items(), key=lambda kv: -abs(kv[1]))[:8]
    print("  largest changes by type: " + ", ".join(f"{k} {v:+d}" for k, v in top))
    tasks = {k: v - base.get(k, 0) for k, v in last.objects_after.items() if k[:6] == "(task)"}
    tasks.update({k: -v for k, v in base.items() if k[:6] == "(task)" and k not in tasks})
    changed = ", ".join(f"{k[7:]} {v:+d}" for k, v in sorted(tasks.items()) if v)
    print(f"  trio tasks by name, changes: {changed or 'none'}")
    print(f"stats: baseline {report['stats_base']}")
    for r in rounds:
        print(f"       round {r.number + 1}: clients done {r.stats_end}, settled {r.stats_settled}")
    print(f"server log {server.log_path}: Traceback lines {len(tracebacks)}")
    for word in ("ERROR", "WARNING"):
        lines = log_lines(server, word)
        print(f"  {word} lines: {len(lines)}")
        for line in lines[:10]:
            print(f"    {line}")
    print()
    categories = ("lost", "stuck", "double-terminal", "mismatch", "transport", "listen")
    counts = {c: len(violations.get(c, [])) for c in categories}
    counts.update({c: len(v) for c, v in violations.items() if c not in counts})
    print("violations: " + ", ".join(f"{c} {n}" for c, n in counts.items()))
    for category, texts in violations.items():
        for text in texts[:15]:
            print(f"  [{category}] {text}")
        if len(texts) > 15:
            print(f"  [{category}] ... {len(texts) - 15} more")
    print("RESULT: " + ("FAIL" if violations else "PASS"), flush=True)
    return 1 if violations else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per round (2000)")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (50)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the task mix (1)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="passes over the same server, settling between (1)"
    )
    parser.add_argument("--ttl-ms", type=int, default=4000, help="the server's task TTL (4000)")
    parser.add_argument(
        "--reap-seconds",
        type=float,
        default=1.0,
        help="the server's reap_interval: how often expired records are deleted (1.0)",
    )
    parser.add_argument(
        "--listen-clients", type=int, default=3, help="clients following their tasks (3)"
    )
    parser.add_argument("--group", type=int, default=4, help="tasks per listen stream (4)")
    parser.add_argument(
        "--store",
        default=os.environ.get("PRESA_STORE") or "memory:",
        help="the server's backend URL (default: $PRESA_STORE, else memory:)",
    )
    parser.add_argument("--port", type=int, default=0, help="server port (0: a free one)")
    parser.add_argument("--log", type=Path, default=None, help="server log file (a temp file)")
    parser.add_argument(
        "--settle",
        type=float,
        default=QUIET_SECONDS,
        help=f"quiet seconds before the after-sample ({QUIET_SECONDS})",
    )
    parser.add_argument(
        "--fd-slack",
        type=int,
        default=None,
        help="fd growth tolerated (2, plus the fds a shared store's connection pool may "
        "still open after the baseline: 2 per SQLite connection, 1 per PostgreSQL one)",
    )
    args = parser.parse_args()
    if args.fd_slack is None:
        args.fd_slack = 2 + pool_fds(args.store)
    if args.listen_clients > args.clients or min(args.tasks, args.clients, args.rounds) < 1:
        parser.error("need tasks, clients, rounds >= 1 and listen-clients <= clients")
    return args


def main() -> int:
    args = parse_args()
    for sig in (signal.SIGTERM, signal.SIGHUP):  # stop the server on the way out, always
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    log_path = args.log or Path(tempfile.mkstemp(prefix="soak-server-", suffix=".log")[1])
    port = args.port or free_port()
    versions = ", ".join(
        f"{name} {metadata.version(name)}" for name in ("trio", "hypercorn", "h11")
    )
    print(
        f"# soak {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC, "
        f"python {sys.version.split()[0]}, {versions}"
    )
    print(f"# {' '.join(sys.argv)}")
    server = start_server(port, log_path, args.ttl_ms, args.reap_seconds, args.store)
    try:
        wait_ready(server)
        print(
            f"# server: hypercorn master {server.process.pid}, worker {server.worker}, "
            f"port {port}, log {log_path}"
        )
        report = trio.run(soak_main, args, server)
        status = evaluate(args, report, server)
    finally:  # also when interrupted or crashed: the server never outlives the soak
        code = stop_server(server)
        shutdown_tracebacks = len(log_lines(server, "Traceback"))
        print(
            f"# server stopped, exit status {code}; Traceback lines after shutdown "
            f"{shutdown_tracebacks}",
            flush=True,
        )
    if shutdown_tracebacks or code not in (0, -signal.SIGTERM):
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
