"""Child processes of the embedded stack, spawned for real: a child that fails or dies
at start is reported at once with its reason, it leaves the terminal's process group,
and what it counted in shared counters outlives a SIGKILL."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from dataclasses import dataclass
from typing import Any

import pytest

from pathgrade.stack.children import ChildFailed, ChildProcess, SharedCounters, child_process
from pathgrade.stack.messages import Ready, Stop, Stopped

SPAWN = mp.get_context("spawn")


@dataclass(frozen=True)
class GroupReady(Ready):
    """Ready, with the child's process group and whether it ignores SIGINT."""

    group: int
    sigint_ignored: bool


@dataclass
class Tally:
    requests: int = 0
    spans: int = 0
    latest: str = ""  # not an int: kept in the child only


def fails_at_start(events: Any, commands: Any) -> None:
    with child_process("failing", events):
        raise ValueError("tokens_file: expected a mapping")


def dies_at_start(events: Any, commands: Any) -> None:
    with child_process("dying", events):
        os._exit(3)


def counts_then_waits(tally: SharedCounters[Tally], events: Any, commands: Any) -> None:
    with child_process("counting", events):
        counters = tally.counters()
        for _ in range(5):
            counters.requests += 1
            counters.spans += 7
        counters.latest = "kept here"
        events.put(GroupReady(os.getpgid(0), signal.getsignal(signal.SIGINT) is signal.SIG_IGN))
        while not isinstance(commands.get(), Stop):
            pass
        events.put(Stopped({"spans": counters.spans}))


def test_a_child_failing_at_start_is_reported_with_its_reason() -> None:
    child = ChildProcess(SPAWN, "failing", fails_at_start)
    with pytest.raises(ChildFailed, match=r"^ValueError: tokens_file: expected a mapping$"):
        child.start()
    child.process.join(timeout=30)
    assert child.process.exitcode == 1


def test_a_child_dying_before_it_is_ready_is_noticed_without_waiting_for_the_timeout() -> None:
    child = ChildProcess(SPAWN, "dying", dies_at_start)
    with pytest.raises(ChildFailed, match="exited with code 3 before it was ready"):
        child.start(timeout_s=600)  # not "did not start in 600 s"


def test_counters_outlive_a_killed_child_which_has_its_own_process_group() -> None:
    tally = SharedCounters(SPAWN, Tally)
    assert tally.names == ["requests", "spans"]
    child = ChildProcess(SPAWN, "counting", counts_then_waits, shared=[tally])
    ready = child.start()
    assert isinstance(ready, GroupReady)
    assert ready.group == child.pid != os.getpgid(0) and ready.sigint_ignored
    os.kill(child.pid, signal.SIGKILL)
    child.process.join(timeout=30)
    assert child.counted() == {"requests": 5, "spans": 35}
    assert child.stop() is None  # dead: no answer, no wait


def test_a_child_stops_on_request() -> None:
    child = ChildProcess(
        SPAWN, "counting", counts_then_waits, shared=[SharedCounters(SPAWN, Tally)]
    )
    child.start()
    stopped = child.stop(timeout_s=60)
    assert stopped is not None and stopped.counters == {"spans": 35} and not child.alive()
    assert child.process.exitcode == 0
