"""``presa-trio serve --workers N``: a supervisor keeps N trio workers on one socket. A worker
killed with SIGKILL (as the OOM killer does) is replaced while the others serve on, its tasks
are failed through the lease, SIGTERM stops every worker with final results on listen
streams, a worker that keeps dying as it starts makes the supervisor give up with a non-zero
status, and no worker outlives its supervisor."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
import trio
from support.live_http import mcp_request, open_exchange
from support.servers import ROOT, Served, free_port
from support.workers_client import HERE, LEASE, LOST, TASKS, YES, Cluster, park_and_run, warm

pytestmark = pytest.mark.e2e

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
SHUTDOWN = 4.0  # --shutdown-timeout of these tests' workers


@contextmanager
def supervised(
    tmp_path: Path, target: str = "workers_app:server", workers: int = 3, *flags: str
) -> Iterator[Served]:
    """``presa-trio serve TARGET --workers N`` on 127.0.0.1 with one SQLite file, its output in
    a file; stopped (SIGTERM, then SIGKILL) at the end however the test went."""
    records = tmp_path / "records"
    records.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PRESA_STORE": f"sqlite:///{tmp_path}/shared.db?lease={LEASE}",
        "WORKERS_DIR": str(records),
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    port = free_port()
    log_path = tmp_path / "serve.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "presa_trio",
                "serve",
                target,
                "--workers",
                str(workers),
                "--http",
                f"127.0.0.1:{port}",
                "--shutdown-timeout",
                str(SHUTDOWN),
                "--log-level",
                "info",
                *flags,
            ],
            cwd=HERE,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    served = Served(port, process, log_path)
    try:
        deadline = time.monotonic() + 30
        while process.poll() is None:  # the supervisor listens before any worker runs
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the supervisor never listened"
                time.sleep(0.05)
        yield served
    except Exception as exc:
        exc.add_note(f"presa-trio serve log, its end:\n{served.log()[-4000:]}")
        raise
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=SHUTDOWN + 10)
        except subprocess.TimeoutExpired:
            process.kill()  # its workers see its pipe close, and stop within their bound
            process.wait()


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie waiting to be reaped counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


async def until_gone(pids: set[int], within: float) -> float:
    """Wait until every process in ``pids`` has ended; how long it took."""
    start = trio.current_time()
    with trio.fail_after(within):
        while not all(gone(pid) for pid in pids):  # noqa: ASYNC110
            await trio.sleep(0.05)
    return trio.current_time() - start


async def test_a_killed_worker_is_replaced_its_tasks_fail_and_the_others_serve_on(
    tmp_path: Path,
) -> None:
    with supervised(tmp_path) as served:
        cluster = Cluster(served, tmp_path / "records")
        await warm(cluster)
        tags = await park_and_run(cluster, "w")
        victim, doomed = next((pid, kinds) for pid, kinds in tags.items() if len(kinds) == 2)
        spared = [
            task_id
            for pid, kinds in tags.items()
            if pid != victim
            for tool, task_id in kinds.items()
            if tool == "asker"
        ]
        os.kill(victim, signal.SIGKILL)
        killed = trio.current_time()

        # Fresh connections are answered at once by the others: no worker is needed for the
        # socket to accept, and the supervisor keeps it.
        with trio.fail_after(10):
            answered_by = {await cluster.whoami() for _ in range(10)}
        assert victim not in answered_by
        assert served.alive()

        # The dead worker's tasks are failed by a survivor within the lease and a quarter
        # (the bound here is wider: the machine may be loaded).
        for task_id in doomed.values():
            failed = await cluster.until(task_id, "failed", within=LEASE * 1.25 + 15)
            assert failed["error"] == LOST
        lost_after = trio.current_time() - killed

        # The tasks of the other workers were not touched: they still take their answers.
        for task_id in spared:
            assert (await cluster.task("tasks/get", task_id))["status"] == "input_required"
            await cluster.task("tasks/update", task_id, inputResponses={"go": YES})
            assert (await cluster.until(task_id, "completed"))["status"] == "completed"

        # A new worker took the dead one's place.
        with trio.fail_after(30):
            while True:
                pids = await cluster.pids(15)
                if len(pids) == 3:
                    break
        assert victim not in pids
        assert served.alive()
        log = served.log()
        assert f"(pid {victim}) killed by SIGKILL; starting a new one" in log
    assert served.process.returncode == 0
    print(f"lost-worker tasks failed {lost_after:.2f} s after SIGKILL (lease {LEASE} s)")


async def test_sigterm_stops_every_worker_within_the_bound_with_final_results(
    tmp_path: Path,
) -> None:
    with supervised(tmp_path) as served:
        cluster = Cluster(served, tmp_path / "records")
        await warm(cluster)
        workers = await cluster.pids(15)
        async with trio.open_nursery() as nursery:
            finals: list[dict[str, object]] = []
            acknowledged = trio.Semaphore(0)

            async def listen(request_id: int) -> None:
                body, headers = mcp_request(
                    "subscriptions/listen",
                    {"notifications": {"toolsListChanged": True}},
                    capabilities=TASKS,
                    request_id=request_id,
                )
                async with open_exchange(served.port, body, headers) as stream:
                    ack = await stream.next_message()
                    assert ack["method"] == "notifications/subscriptions/acknowledged"
                    acknowledged.release()
                    finals.append(await stream.next_message())

            for n in range(6):
                nursery.start_soon(listen, 100 + n)
            with trio.fail_after(10):
                for _ in range(6):
                    await acknowledged.acquire()
            served.process.send_signal(signal.SIGTERM)
            signalled = trio.current_time()
        took = trio.current_time() - signalled
        assert took < SHUTDOWN, "a listen stream had no final result within the bound"
        assert sorted(f["id"] for f in finals) == list(range(100, 106))  # type: ignore[type-var]
        for final in finals:
            result = final["result"]
            assert isinstance(result, dict)
            assert result["resultType"] == "complete"
            assert result["_meta"][SUBSCRIPTION_ID] == final["id"]
        status = await trio.to_thread.run_sync(served.process.wait, SHUTDOWN + 5)
        assert status == 0
        await until_gone(workers, within=5)
        assert "SIGTERM: stopping 3 worker(s)" in served.log()


async def test_a_worker_that_keeps_dying_at_start_makes_the_supervisor_give_up(
    tmp_path: Path,
) -> None:
    with supervised(tmp_path, "failing_app:server", 2) as served:
        status = await trio.to_thread.run_sync(served.process.wait, 120)
        assert status == 1
        log = served.log()
        assert "exited with status 1; starting a new one" in log
        assert "times in a row: giving up" in log
        assert "Traceback" in log  # each worker said why it could not start


async def test_workers_stop_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    with supervised(tmp_path, "workers_app:server", 2) as served:
        cluster = Cluster(served, tmp_path / "records")
        await warm(cluster, 2)
        workers = await cluster.pids(10)
        served.process.kill()
        served.process.wait()
        took = await until_gone(workers, within=SHUTDOWN + 10)
        assert took < SHUTDOWN + 5
        assert served.log().count("the supervisor is gone; this worker stops") == 2


def serve_refused(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "presa_trio", "serve", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PRESA_STORE"},
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("examples.weather:server", "--workers", "2"),
            "presa-trio: --workers 2 needs a store the workers share (--store "
            "sqlite:///ABSOLUTE/PATH.db or postgresql://...): in memory, each worker would "
            "keep tasks the others cannot see\n",
        ),
        (
            ("examples.weather:server", "--workers", "2", "--store", "memory:"),
            "presa-trio: --workers 2 needs a store the workers share (--store "
            "sqlite:///ABSOLUTE/PATH.db or postgresql://...): in memory, each worker would "
            "keep tasks the others cannot see\n",
        ),
        (
            ("examples.weather:server", "--workers", "1", "--stdio"),
            "presa-trio: --workers is for --http; stdio is served by one process\n",
        ),
        (
            ("examples.weather:server", "--workers", "1", "--http", "unix:/tmp/presa.sock"),
            "presa-trio: --workers listens on HOST:PORT or fd://N, not on a unix: socket\n",
        ),
    ],
)
def test_serve_refuses_workers_it_cannot_run_as_one_server(
    args: tuple[str, ...], line: str
) -> None:
    done = serve_refused(*args)
    assert (done.returncode, done.stderr, done.stdout) == (2, line, "")


def test_workers_must_be_a_positive_number() -> None:
    done = serve_refused("examples.weather:server", "--workers", "0")
    assert done.returncode == 2
    assert "argument --workers: at least 1" in done.stderr


def test_the_help_names_the_workers_option() -> None:
    done = serve_refused("--help")
    assert done.returncode == 0
    assert "--workers N" in done.stdout


@pytest.fixture(autouse=True)
def _no_stray_workers() -> Iterator[None]:
    """Each test's workers are gone when it ends: none outlives the test."""
    yield
    deadline = time.monotonic() + SHUTDOWN + 10
    mine = str(os.getpid())
    while time.monotonic() < deadline:
        found = subprocess.run(
            ["pgrep", "-f", "presa_trio serve .* --supervisor-fd"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        stray = [p for p in found if p != mine and not gone(int(p))]
        if not stray:
            return
        time.sleep(0.1)
    for pid in stray:
        with suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    pytest.fail(f"workers outlived their supervisor: {stray}")
