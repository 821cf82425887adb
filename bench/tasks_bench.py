"""Measures Tasks-extension cost at the dispatcher: tools/call vs task-create vs tasks/get ops/s,
bytes per parked task, tasks/get latency vs live tasks. Not measured: HTTP/ASGI, sockets, I/O."""

from __future__ import annotations

import argparse
import gc
import json
import random
import secrets
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio
import trio.testing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # callgrind.py beside this file

from presa_trio import Context, Runtime, Server
from presa_trio._protocol.jsonrpc import encode, parse_message
from presa_trio.ext.tasks import EXTENSION_ID, TaskLimits, TasksExtension
from presa_trio.ext.tasks._runner import TaskRunner
from presa_trio.mrtr import elicit

TARGET = 8 * 1024  # bytes per parked task (issue 12)
OPTIONAL = {"tasks": "optional"}
CAPABILITIES: dict[str, Any] = {"elicitation": {}, "extensions": {EXTENSION_ID: {}}}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
    "io.modelcontextprotocol/clientInfo": {"name": "tasks-bench", "version": "1"},
}


def body(method: str, params: dict[str, Any], request_id: int = 1) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    return json.dumps({**message, "params": {**params, "_meta": META}}).encode()


CALL_PING = body("tools/call", {"name": "ping", "arguments": {}})
CALL_TASK = body("tools/call", {"name": "ping_task", "arguments": {}})
CALL_PARK = body("tools/call", {"name": "park", "arguments": {}})
CALL_PARK_3 = body("tools/call", {"name": "park_3", "arguments": {}})


class Sink:
    """A minimal Responder (no stream): keeps the final message until ``rpc`` takes it."""

    __slots__ = ("message",)

    async def notify(self, message: Any = None) -> None:
        """Nothing here notifies (``keepalive`` likewise)."""

    keepalive = notify

    async def finish(self, data: bytes, status: int, headers: Any = ()) -> None:
        self.message = json.loads(data)


def build() -> Server:
    # Defaults (Validation(inbound=True, outbound=False)), without the loop watch: a bench
    # loop of calls that never wait is what it warns about, not a handler.
    server = Server("tasks-bench", "0", loop_warning=None)
    server.add_extension(
        TasksExtension(
            limits=TaskLimits(
                max_tasks=None,
                max_stored_per_principal=None,
                max_active_per_principal=None,
                max_stored_bytes=None,  # 10,000 parked tasks pass the default byte bound
            )
        )
    )

    def pong() -> str:
        return "pong"

    # thread=False: run the trivial sync tool on the event loop, so the figures are presa's own
    # per-request (and per-task) cost, not a hop to a worker thread and back.
    server.tool("ping", description="Trivial sync tool.", thread=False)(pong)
    ping_task = server.tool(
        "ping_task", description="The same, a task if asked.", options=OPTIONAL, thread=False
    )
    ping_task(pong)

    @server.tool(description="Parks on one elicitation.", options=OPTIONAL)
    async def park(ctx: Context) -> str:
        question = elicit("Value?", {"v": {"type": "string"}}, ["v"])
        answer = await ctx.input({"value": question})
        return str(answer["value"])

    @server.tool(description="Parks on three elicitations asked at once.", options=OPTIONAL)
    async def park_3(ctx: Context) -> str:
        questions = {key: elicit(f"{key}?", {"v": {"type": "string"}}, ["v"]) for key in "abc"}
        answers = await ctx.input(questions)
        return ",".join(sorted(answers))

    return server


def runner_of(runtime: Runtime) -> TaskRunner:
    """The task runner of this run (the Tasks extension's service holds it)."""
    runner: TaskRunner = runtime.service(EXTENSION_ID).runner
    return runner


async def rpc(server: Server, runtime: Runtime, data: bytes) -> dict[str, Any]:
    sink = Sink()
    request = parse_message(data)  # always a Request here: every body has an id
    await server.dispatcher.serve(request, None, sink, runtime)  # type: ignore[arg-type]
    message = sink.message
    del sink.message  # a task's closure keeps its creating Context (and so this responder) alive
    encode(message)
    if "error" in message:
        raise RuntimeError(message["error"])
    return message["result"]  # type: ignore[no-any-return]


async def park_tasks(
    server: Server, runtime: Runtime, count: int, call: bytes = CALL_PARK, questions: int = 1
) -> list[str]:
    runner = runner_of(runtime)
    before = runner.parked_count()
    ids = [(await rpc(server, runtime, call))["taskId"] for _ in range(count)]
    await trio.testing.wait_all_tasks_blocked()  # each task parks once it gets to run
    assert runner.parked_count() == before + count * questions
    return ids


async def parked_bytes(count: int, call: bytes, questions: int) -> float:
    """tracemalloc's bytes per task parked by ``call`` (``questions`` asked at once)."""
    server = build()
    async with server.open_runtime() as runtime:
        await warm_up(server, runtime)
        for task_id in await park_tasks(server, runtime, 10, call, questions):  # its caches
            await rpc(server, runtime, body("tasks/cancel", {"taskId": task_id}))
        gc.collect()
        tracemalloc.start()
        traced0 = tracemalloc.get_traced_memory()[0]
        ids = await park_tasks(server, runtime, count, call, questions)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - traced0 - own_bytes(ids)
        tracemalloc.stop()
        for task_id in ids:
            await rpc(server, runtime, body("tasks/cancel", {"taskId": task_id}))
    return traced / count


async def statuses(server: Server, runtime: Runtime, ids: list[str]) -> dict[str, int]:
    gets = [body("tasks/get", {"taskId": i}) for i in ids]
    found = [(await rpc(server, runtime, data))["status"] for data in gets]
    return dict(Counter(found))


def own_bytes(ids: list[str]) -> int:
    """What the bench itself holds for the tasks it parked (its list of their ids, parsed
    from the answers): not the server's, so not counted per task."""
    return sys.getsizeof(ids) + sum(map(sys.getsizeof, ids))


def rss_kb() -> int:
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0])


async def warm_up(server: Server, runtime: Runtime) -> None:
    """Exercise every path once (lazy caches, validators) and leave nothing live."""
    for task_id in await park_tasks(server, runtime, 100):
        await rpc(server, runtime, body("tasks/get", {"taskId": task_id}))
        await rpc(server, runtime, body("tasks/cancel", {"taskId": task_id}))
    await rpc(server, runtime, CALL_PING)
    await rpc(server, runtime, CALL_TASK)
    await trio.testing.wait_all_tasks_blocked()
    assert runner_of(runtime).live_count == 0


async def get_latency(
    server: Server, runtime: Runtime, ids: list[str], gets: int
) -> tuple[float, float]:
    rng = random.Random(7)
    bodies = [body("tasks/get", {"taskId": rng.choice(ids)}, i) for i in range(gets)]
    samples = []
    for data in bodies:
        t0 = time.perf_counter_ns()
        result = await rpc(server, runtime, data)
        samples.append(time.perf_counter_ns() - t0)
        assert result["status"] == "input_required", result
    samples.sort()
    return samples[len(samples) // 2] / 1e3, samples[int(len(samples) * 0.99) - 1] / 1e3


async def measured(server: Server, runtime: Runtime) -> list[tuple[str, bytes]]:
    """The three operations compared, each as a request body: a plain call, a task's
    creation (its run included), and tasks/get of a completed task."""
    done = await rpc(server, runtime, CALL_TASK)
    await trio.testing.wait_all_tasks_blocked()
    return [
        ("plain sync tools/call", CALL_PING),
        ("task creation (tools/call -> task, tool runs)", CALL_TASK),
        ("tasks/get (one completed task)", body("tasks/get", {"taskId": done["taskId"]})),
    ]


async def throughput(server: Server, runtime: Runtime, ops: int, runs: int) -> None:
    """Each operation's best of ``runs``, the operations taking turns within each run (this
    machine's speed drifts over seconds: a ratio of two figures taken minutes apart would
    measure the drift). The last row is trio's shape for a task with no presa code, timed
    beside the others: a creation pays a plain call and at least that."""
    runner = runner_of(runtime)
    async with trio.open_nursery() as nursery:
        steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            (label, partial(rpc, server, runtime, data))
            for label, data in await measured(server, runtime)
        ]
        steps.append((TRIO_ALONE, partial(spawn_shape, nursery)))
        print(f"\nThroughput: {ops:,} ops each, best of {runs} interleaved (ratio to plain call)")
        best = dict.fromkeys((label for label, _ in steps), float("inf"))
        for _ in range(runs):
            for label, step in steps:
                gc.collect()
                t0 = time.perf_counter()
                for _ in range(ops):
                    await step()
                await trio.testing.wait_all_tasks_blocked()  # task runs are counted too
                best[label] = min(best[label], time.perf_counter() - t0)
                assert runner.live_count == 0 and not nursery.child_tasks
    us = {label: seconds / ops * 1e6 for label, seconds in best.items()}
    plain = us[steps[0][0]]
    for label, each in us.items():
        print(f"   {label:<46} {1e6 / each:>9,.0f} ops/s  {plain / each:5.2f}x  {each:6.1f} us/op")
    ceiling = plain / (plain + us[TRIO_ALONE])
    print(
        f"   a creation can be at most {ceiling:.2f}x a plain call (a plain call and trio's shape)"
    )


def owner(frame: Any) -> str:
    """Whose work a frame does: presa's, trio's (trio and outcome, with the methods attrs
    makes for their classes), or the harness's. The standard library's frames and generated
    ``__init__`` methods count as their caller's (trio's ``contextlib`` managers are trio's)."""
    while frame is not None:
        name = frame.f_code.co_filename
        if "presa_trio" in name:
            return "presa"
        if "/trio/" in name or "/outcome/" in name or name.startswith("<attrs generated"):
            return "trio"
        if name == __file__:
            return "harness"
        frame = frame.f_back
    return "harness"


TRIO_ALONE = "trio alone: spawn, nursery, deadline"


async def _shape() -> None:
    """The runner's trio shape for a task, with no presa code: a nursery of its own, the TTL
    its cancel scope's deadline (``tasks/cancel`` cancels that scope)."""
    async with trio.open_nursery() as nursery:
        nursery.cancel_scope.deadline = trio.current_time() + 3600


async def spawn_shape(nursery: trio.Nursery) -> None:
    nursery.start_soon(_shape)
    await trio.lowlevel.checkpoint()  # one scheduler pass, as a tool that awaits once


async def opcodes(server: Server, runtime: Runtime, ops: int) -> None:
    """Python opcodes per op (``sys.settrace`` with ``f_trace_opcodes``): deterministic where
    times are noisy; C work (JSON, jsonschema-rs) counts as one call. A task's run counts.
    Each op's count is split by whose code ran it (``owner``). The last row is trio's own
    share of a task: the runner's shape with no presa code. The closing lines say how far
    trio's share alone puts a task's creation from a plain call."""
    counts: Counter[str] = Counter()

    def trace(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        whose = owner(frame)

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "opcode":
                counts[whose] += 1
            return local

        return local

    async def per_op(step: Callable[[], Awaitable[object]]) -> dict[str, float]:
        counts.clear()
        sys.settrace(trace)
        for _ in range(ops):
            await step()
        await trio.testing.wait_all_tasks_blocked()  # task runs are counted too
        sys.settrace(None)
        return {whose: counts[whose] / ops for whose in ("presa", "trio", "harness")}

    print(f"\nPython opcodes per op, {ops:,} ops each (ratio to plain tools/call)")
    rows = [
        (label, await per_op(partial(rpc, server, runtime, data)))
        for label, data in await measured(server, runtime)
    ]
    async with trio.open_nursery() as nursery:
        rows.append((TRIO_ALONE, await per_op(partial(spawn_shape, nursery))))
    print(f"   {'':<46} {'opcodes':>9}  {'ratio':>5}  {'presa':>7} {'trio':>7} {'harness':>7}")
    plain = sum(rows[0][1].values())
    for label, split in rows:
        total = sum(split.values())
        parts = " ".join(f"{split[whose]:>7,.0f}" for whose in ("presa", "trio", "harness"))
        print(f"   {label:<46} {total:>9,.0f}  {plain / total:4.2f}x  {parts}")
    # A creation is a plain call's work and more: with nothing of presa's beyond a plain
    # call's, it would still pay trio's share, and at the least trio's shape alone.
    trio_creation = rows[1][1]["trio"] - rows[0][1]["trio"]
    trio_shape = sum(rows[-1][1].values())
    print(
        f"   creation with no presa work beyond a plain call's: at most"
        f" {plain / (plain + trio_creation):.2f}x (trio's share of a creation as it is),"
        f" {plain / (plain + trio_shape):.2f}x (trio's shape alone)"
    )


Tool = Callable[[trio.MemoryReceiveChannel[Any]], Awaitable[Any]]


async def _parked_bytes(count: int, tool: Tool) -> float:
    """Bytes/task of ``count`` tasks in the runner's trio shape (``TaskRunner.launch`` and
    ``_run``): a spawned task, its nursery (the TTL that nursery's deadline), one channel,
    and ``tool`` parked on it."""

    async def task() -> None:
        _send, receive = trio.open_memory_channel[Any](1)  # _send stays alive in this frame
        async with trio.open_nursery() as nursery:
            nursery.cancel_scope.deadline = trio.current_time() + 3600
            await tool(receive)

    async with trio.open_nursery() as nursery:
        gc.collect()
        tracemalloc.start()
        for _ in range(count):
            nursery.start_soon(task)
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        size = tracemalloc.get_traced_memory()[0] / count
        tracemalloc.stop()
        nursery.cancel_scope.cancel()
    return size


async def trio_floor(count: int) -> float:
    """Bytes/task of the runner's trio shape alone, the tool's frame parked on its channel
    and nothing more. What presa adds is the rest of a parked task."""

    async def tool(receive: trio.MemoryReceiveChannel[Any]) -> Any:
        return await receive.receive()

    return await _parked_bytes(count, tool)


async def folded_floor(count: int) -> float:
    """Bytes/task of a parked task with nothing of presa's structure: trio's shape as in
    ``trio_floor``, and what any server must keep to answer ``tasks/get`` for it, made in
    the tool's frame: the question (as ``park`` asks it), and a record of the wire's fields
    in a dict under the task's id. The 8 KB target less this is what it leaves for a
    library's structure."""
    records: dict[str, dict[str, Any]] = {}

    async def tool(receive: trio.MemoryReceiveChannel[Any]) -> Any:
        question = elicit("Value?", {"v": {"type": "string"}}, ["v"])
        task_id = secrets.token_urlsafe(24)
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())  # as the wire writes it
        records[task_id] = {
            "taskId": task_id, "status": "input_required", "createdAt": now,
            "lastUpdatedAt": now, "ttlMs": 3_600_000, "pollIntervalMs": 250,
            "inputRequests": {"value": question},
        }  # fmt: skip
        return await receive.receive()

    return await _parked_bytes(count, tool)


COUNTED = {"plain": CALL_PING, "creation": CALL_TASK}


async def count_one(op: str, n: int) -> None:
    """``n`` of one operation after a warm-up, for ``instructions`` (run under callgrind)."""
    server = build()
    async with server.open_runtime() as runtime:
        await warm_up(server, runtime)
        data = COUNTED[op]
        for _ in range(n):
            await rpc(server, runtime, data)
        await trio.testing.wait_all_tasks_blocked()  # a creation's run is counted too


def instructions(n: int) -> None:
    """Machine instructions per plain call and per task creation (its run included), counted
    by valgrind's callgrind: exact for the same binaries, whatever else the machine does.
    Two runs per operation, ``n`` operations apart; the difference is the operations alone
    (each run also pays for starting Python, building the server and the warm-up)."""
    import subprocess

    import callgrind

    if not callgrind.available():
        raise SystemExit(callgrind.MISSING)
    per: dict[str, float] = {}
    for op in COUNTED:
        counts = []
        for ops in (100, 100 + n):
            command = [*callgrind.PREFIX, sys.executable, __file__, "--count-one", op,
                       "-n", str(ops)]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            counts.append(callgrind.collected(done.stderr))
        per[op] = (counts[1] - counts[0]) / n
        print(f"   {op:<10} {per[op]:>11,.0f} instructions", flush=True)
    print(f"   a creation is {per['plain'] / per['creation']:.3f}x a plain call")


async def main(args: argparse.Namespace) -> None:
    if args.count_one:
        await count_one(args.count_one, args.n)
        return
    if args.opcodes:
        server = build()
        async with server.open_runtime() as runtime:
            await warm_up(server, runtime)
            await opcodes(server, runtime, 500)
        return
    parked, gets = (1_000, 1_000) if args.quick else (10_000, 5_000)
    ops, runs = (2_000, 3) if args.quick else (4_000, 12)
    print(f"tasks_bench: python {sys.version.split()[0]}, trio {trio.__version__}; level: bytes")
    print("  -> parse_message -> Dispatcher.serve -> encode (inbound validation on, outbound off)")

    # Pass A, first in the process (freed arenas would hide growth), tracemalloc off:
    # tasks/get latency with 10 live tasks, RSS growth, then latency with 10 + `parked` live.
    server = build()
    async with server.open_runtime() as runtime:
        runner = runner_of(runtime)
        await warm_up(server, runtime)
        ids = await park_tasks(server, runtime, 10)
        latency = {runner.live_count: await get_latency(server, runtime, ids, gets)}
        gc.collect()
        rss0 = rss_kb()
        t0 = time.perf_counter()
        more = await park_tasks(server, runtime, parked)
        park_s = time.perf_counter() - t0
        gc.collect()
        rss1 = rss_kb() - own_bytes(more) // 1024
        ids += more
        latency[runner.live_count] = await get_latency(server, runtime, ids, gets)
        t0 = time.perf_counter()
    close_s, live_a = time.perf_counter() - t0, runner.live_count

    # Pass B, tracemalloc on: Python-heap bytes per parked task, then tasks/cancel each.
    server = build()
    async with server.open_runtime() as runtime:
        runner = runner_of(runtime)
        await warm_up(server, runtime)
        gc.collect()
        tracemalloc.start()
        traced0 = tracemalloc.get_traced_memory()[0]
        ids = await park_tasks(server, runtime, parked)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - traced0 - own_bytes(ids)
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        parked_b, before = runner.parked_count(), await statuses(server, runtime, ids)
        t0 = time.perf_counter()
        for task_id in ids:
            await rpc(server, runtime, body("tasks/cancel", {"taskId": task_id}))
        cancel_s, live_cancel = time.perf_counter() - t0, runner.live_count
        after = await statuses(server, runtime, ids)
    live_b = runner.live_count

    per, rss_per = traced / parked, (rss1 - rss0) * 1024 / parked
    print(f"\nMemory per parked input_required task ({parked:,} tasks, one ctx.input key each)")
    print(f"   created+parked in {park_s:.2f} s ({parked / park_s:,.0f}/s)")
    print(f"   runner.parked_count()={parked_b:,}; tasks/get statuses {before}")
    for label, total, each in [
        ("tracemalloc", traced, per),
        ("VmRSS delta", (rss1 - rss0) * 1024, rss_per),  # pass A: tracemalloc off
    ]:
        mark = "OK" if each < TARGET else "OVER"
        print(f"   {label}: {total:>11,} B -> {each:6,.0f} B/task  [{mark} target {TARGET:,}]")
    print(f"   trio floor (same trio shape, no presa): {await trio_floor(parked):6,.0f} B/task")
    folded = await folded_floor(parked)
    print(f"   folded (trio's shape, the question, a record; no presa): {folded:6,.0f} B/task")
    three = await parked_bytes(parked // 5, CALL_PARK_3, 3)
    print(f"   three questions in one ctx.input ({parked // 5:,} tasks): {three:6,.0f} B/task")
    print(f"   tasks/cancel x{parked:,}: {cancel_s:.2f} s; statuses after {after}")
    print(f"   runner.live_count: {live_cancel} after the cancels, {live_b} after server close")
    print(f"   pass A, server close with {parked + 10:,} parked: {close_s:.2f} s, live {live_a}")
    if args.profile or per >= TARGET:
        traces = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        top = traces.statistics("lineno")
        print(f"   top 15 of {len(top)} live allocation sites (bytes/task, blocks/task):")
        for stat in top[:15]:
            frame = stat.traceback[0]
            where = f"{'/'.join(Path(frame.filename).parts[-2:])}:{frame.lineno}"
            print(f"     {stat.size / parked:7,.0f} B {stat.count / parked:5.2f}  {where}")

    print(f"\ntasks/get latency, {gets:,} gets of random live (parked) task ids (pass A)")
    for live, (median, p99) in latency.items():
        print(f"   {live:>7,} live: median {median:6.1f} us   p99 {p99:6.1f} us")
    (small, big), ratio = latency.values(), "/".join(f"{n:,}" for n in reversed(latency))
    print(f"   ratio {ratio}: median {big[0] / small[0]:.2f}x   p99 {big[1] / small[1]:.2f}x")

    # Pass C: throughput, same harness for all three.
    server = build()
    async with server.open_runtime() as runtime:
        runner = runner_of(runtime)
        await warm_up(server, runtime)
        await throughput(server, runtime, ops, runs)
    print(f"   runner.live_count after server close: {runner.live_count}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    parser.add_argument("--profile", action="store_true", help="always print tracemalloc top 15")
    parser.add_argument("--opcodes", action="store_true", help="only count opcodes per op")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="only count machine instructions per op (valgrind; about 2 min with -n 1000)",
    )
    parser.add_argument("-n", type=int, default=1000, help="ops per count (--instructions)")
    parser.add_argument("--count-one", choices=sorted(COUNTED), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.instructions:
        print(f"Machine instructions per op (callgrind, {arguments.n:,} ops)")
        instructions(arguments.n)
    else:
        trio.run(main, arguments)
