"""The graders of the cancellation guide's exercises (docs/cancellation.md, section 9).

Each grader runs an answer on trio's MockClock with autojump, so every bound is checked to
the exact second. The suite grades the reference answers in exercises/cancellation/solutions/
and checks that each starting file fails its grader; a reader grades their own folder with
``PRESA_EXERCISES=DIR python -m pytest tests/cancellation/test_exercises.py::test_answer``.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType

import pytest
import trio
import trio.testing

from presa_trio import Server
from presa_trio.ext.tasks import EXTENSION_ID, TasksExtension
from presa_trio.testing import open_client

ROOT = Path(__file__).resolve().parents[2]
STARTING = ROOT / "exercises" / "cancellation"
ANSWERS = Path(os.environ.get("PRESA_EXERCISES", STARTING / "solutions")).expanduser()
TASKS = {"extensions": {EXTENSION_ID: {}}}


def load(folder: Path, name: str) -> ModuleType:
    path = folder / f"{name}.py"
    assert path.is_file(), f"no answer at {path}"
    spec = importlib.util.spec_from_file_location(f"exercise_{folder.name}_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def since(start: float) -> float:
    return round(trio.current_time() - start, 6)


# ---------------------------------------------------------------- 1. bounded_cleanup


class Lease:
    """A lease whose release takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.released_at: float | None = None

    async def release(self) -> None:
        await trio.sleep(self.seconds)
        self.released_at = trio.current_time()


async def grade_bounded_cleanup(answer: ModuleType) -> None:
    assert answer.CLEANUP_SECONDS == 2.0, "keep CLEANUP_SECONDS at 2.0"
    quick = Lease(0.5)
    start = trio.current_time()
    with trio.move_on_after(1) as scope:
        await answer.hold(quick)
    assert quick.released_at is not None, "the lease was not released"
    assert scope.cancelled_caught, "hold swallowed its cancellation"
    assert since(start) == 1.5, "hold must end when its release does"

    stuck = Lease(3600)
    start = trio.current_time()
    with trio.move_on_after(1) as scope:
        await answer.hold(stuck)
    assert since(start) == 1 + answer.CLEANUP_SECONDS, "the release was not bounded"
    assert stuck.released_at is None and scope.cancelled_caught


# ---------------------------------------------------------------- 2. cpu_loop


def reference_checksum(data: bytes) -> int:
    total = 0
    for byte in data:
        total = (total * 31 + byte) % 1_000_000_007
    return total


async def grade_cpu_loop(answer: ModuleType) -> None:
    assert answer.EVERY == 1000, "keep EVERY at 1000"
    data = bytes(range(256)) * 400  # 102,400 bytes
    assert await answer.checksum(data) == reference_checksum(data), "the checksum changed"

    with trio.move_on_after(0) as scope:  # cancelled before it starts
        await answer.checksum(data)
    assert scope.cancelled_caught, "checksum ran to its end although its scope was cancelled"

    turns = 0

    async def other_task() -> None:
        nonlocal turns
        while True:
            turns += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_task)
        await answer.checksum(data)
        nursery.cancel_scope.cancel()
    assert turns >= len(data) // answer.EVERY - 1, (
        f"other tasks ran {turns} times while checksum ran: it must let them run every "
        f"{answer.EVERY} bytes (a schedule point, not only a cancel point)"
    )


# ---------------------------------------------------------------- 3. scoped_timeouts


def downloads(seconds: float) -> Callable[[str], Awaitable[str]]:
    async def download(name: str) -> str:
        await trio.sleep(seconds)
        return name.upper()

    return download


async def grade_scoped_timeouts(answer: ModuleType) -> None:
    for function in (answer.fetch, answer.fetch_both):
        named = set(inspect.signature(function).parameters)
        assert not named & {"timeout", "deadline", "seconds"}, (
            f"{function.__name__} still takes a bound: {sorted(named)}"
        )

    start = trio.current_time()
    got = None
    with trio.move_on_after(5):
        got = await answer.fetch_both("a", "b", downloads(4))
    assert since(start) == 4, "the two downloads must run concurrently (4 s, not 8)"
    assert got == ["A", "B"], "fetch_both must return both contents, in order"

    start = trio.current_time()
    with trio.move_on_after(5) as scope:
        await answer.fetch_both("a", "b", downloads(3600))
    assert scope.cancelled_caught and since(start) == 5, "the caller's scope must bound it"

    start = trio.current_time()
    got = await answer.fetch_both("a", "b", downloads(60))
    assert got == ["A", "B"] and since(start) == 60, "a bound is left inside fetch_both"


# ---------------------------------------------------------------- 4. partial_progress


async def grade_partial_progress(answer: ModuleType) -> None:
    assert answer.SAVE_SECONDS == 1.0, "keep SAVE_SECONDS at 1.0"
    server = Server("exercise")
    server.add_extension(TasksExtension())
    saved: list[list[str]] = []
    save_seconds = [0.5]

    async def process(item: str) -> str:
        await trio.sleep(1)
        return item.upper()

    async def save_partial(results: list[str]) -> None:
        await trio.sleep(save_seconds[0])
        saved.append(list(results))

    @server.tool(options={"tasks": "optional"})
    async def crunch(items: list[str]) -> str:
        """Processes the items one second each."""
        return " ".join(await answer.process_all(items, process, save_partial))

    with trio.move_on_after(1.5) as scope:  # on its own first, outside any server
        await answer.process_all(list("abc"), process, save_partial)
    assert scope.cancelled_caught, "process_all swallowed its cancellation"
    assert saved == [["A"]], f"saved {saved}, not the results so far [['A']]"
    saved.clear()

    async with open_client(server, capabilities=TASKS) as client:
        task_id = (await client.call_tool("crunch", {"items": list("abc")}))["taskId"]
        done = await client.wait_task(task_id)
        assert done["result"]["content"][0]["text"] == "A B C" and saved == [], (
            "a task that is not cancelled returns every result and saves nothing"
        )

        for save, expected, acked in ((0.5, [["A", "B", "C"]], 0.5), (3600, [], 1.0)):
            save_seconds[0] = save
            saved.clear()
            task_id = (await client.call_tool("crunch", {"items": list("abcdef")}))["taskId"]
            await trio.sleep(3.5)  # three items are done, the fourth is under way
            start = trio.current_time()
            await client.request("tasks/cancel", {"taskId": task_id})
            assert saved == expected, f"saved {saved}, not the results so far {expected}"
            assert since(start) == acked, "the save must be bounded by SAVE_SECONDS"
            task = await client.request("tasks/get", {"taskId": task_id})
            assert task["status"] == "cancelled"


GRADERS: dict[str, Callable[[ModuleType], Awaitable[None]]] = {
    "bounded_cleanup": grade_bounded_cleanup,
    "cpu_loop": grade_cpu_loop,
    "scoped_timeouts": grade_scoped_timeouts,
    "partial_progress": grade_partial_progress,
}


def grade(name: str, answer: ModuleType) -> None:
    """Run the grader on a mock clock; an answer stuck for a virtual day fails."""

    async def bounded() -> None:
        with trio.fail_after(24 * 3600):
            await GRADERS[name](answer)

    try:
        trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))
    except BaseExceptionGroup as group:  # a failure inside the server's nursery: say it plainly
        failure = group.subgroup((AssertionError, trio.TooSlowError))
        if failure is None:
            raise
        while isinstance(failure, BaseExceptionGroup):
            failure = failure.exceptions[0]
        raise failure from None


@pytest.mark.parametrize("name", GRADERS)
def test_answer(name: str) -> None:
    grade(name, load(ANSWERS, name))


@pytest.mark.parametrize("name", GRADERS)
def test_the_starting_file_fails_its_grader(name: str) -> None:
    with pytest.raises((AssertionError, trio.TooSlowError)):
        grade(name, load(STARTING, name))


def test_every_exercise_has_a_starting_file_a_solution_and_a_grader() -> None:
    starting = {path.stem for path in STARTING.glob("*.py")}
    solved = {path.stem for path in (STARTING / "solutions").glob("*.py")}
    assert starting == solved == set(GRADERS)
