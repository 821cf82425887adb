"""``ShutdownBound``: a process that began to stop is gone within its deadline, and only then.

The exit function is a fake that records its calls; the timer is a real thread, so waits are
bounded with a ``threading.Event`` and never asserted on elapsed time.
"""

from __future__ import annotations

import threading
import time

from presa_trio._process.shutdown import EXIT_STATUS, ShutdownBound

DEADLINE = 0.2
PATIENCE = 5.0


class FakeExit:
    def __init__(self) -> None:
        self.calls: list[int] = []
        self.called = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, status: int) -> None:
        with self.lock:
            self.calls.append(status)
        self.called.set()


def test_exit_status_is_ex_software() -> None:
    assert EXIT_STATUS == 70


def test_not_started_never_exits() -> None:
    fake = FakeExit()
    bound = ShutdownBound(DEADLINE, exit=fake)
    assert not bound.started
    assert not fake.called.wait(DEADLINE * 3)
    bound.cancel()  # cancelling what never started is harmless
    assert fake.calls == []
    assert not bound.started


def test_started_then_cancelled_in_time_never_exits() -> None:
    fake = FakeExit()
    bound = ShutdownBound(DEADLINE, exit=fake)
    bound.start()
    assert bound.started
    bound.cancel()
    assert not fake.called.wait(DEADLINE * 3)
    assert fake.calls == []


def test_started_and_not_cancelled_exits_once_with_70() -> None:
    fake = FakeExit()
    bound = ShutdownBound(DEADLINE, exit=fake)
    bound.start()
    assert fake.called.wait(PATIENCE)
    assert fake.calls == [70]
    time.sleep(DEADLINE * 2)  # nothing else fires later
    assert fake.calls == [70]
    bound.cancel()  # after the fact: changes nothing, raises nothing
    assert fake.calls == [70]


def test_start_is_idempotent() -> None:
    fake = FakeExit()
    bound = ShutdownBound(DEADLINE, exit=fake)
    bound.start()
    first = bound._timer
    bound.start()
    bound.start()
    assert bound._timer is first  # one clock, started once
    assert fake.called.wait(PATIENCE)
    time.sleep(DEADLINE * 2)  # a second timer would have fired by now
    assert fake.calls == [70]


def test_a_later_start_does_not_restart_the_clock() -> None:
    fake = FakeExit()
    bound = ShutdownBound(DEADLINE, exit=fake)
    bound.start()
    bound.cancel()
    bound.start()  # the bound was armed once; starting again arms nothing new
    assert not fake.called.wait(DEADLINE * 3)
    assert fake.calls == []


def test_no_deadline_never_arms() -> None:
    fake = FakeExit()
    bound = ShutdownBound(None, exit=fake)
    bound.start()
    bound.start()
    assert not bound.started
    assert not fake.called.wait(DEADLINE * 3)
    bound.cancel()
    assert fake.calls == []


def test_the_timer_thread_is_a_daemon() -> None:
    # A bound that is still armed must never keep the interpreter alive by itself.
    fake = FakeExit()
    bound = ShutdownBound(60.0, exit=fake)
    bound.start()
    try:
        assert bound._timer is not None and bound._timer.daemon
    finally:
        bound.cancel()
    assert fake.calls == []
