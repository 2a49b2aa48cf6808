"""Full garbage collections run on the timer or on memory growth, not on allocation counts."""

from __future__ import annotations

import gc
import itertools
import time
import weakref
from collections.abc import Callable

from pathgrade.stack.gc_schedule import FullCollections, schedule_full_collections
from pathgrade.stack.process_memory import resident_bytes


def test_full_collections_only_on_the_timer() -> None:
    full: list[float] = []

    def record(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(time.monotonic())

    gc.callbacks.append(record)
    schedule = schedule_full_collections(interval_s=0.3)
    try:
        assert gc.get_threshold()[2] > 10**8
        churn = [[[i] for i in range(1000)] for _ in range(2000)]  # 2M tracked objects
        del churn
        deadline = time.monotonic() + 60  # generous: a loaded machine delays the timer
        while len(full) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(full) >= 2  # the timer's collections, at least 0.3 s apart
        assert all(b - a >= 0.25 for a, b in itertools.pairwise(full))
    finally:
        schedule.stop()
        gc.callbacks.remove(record)
    assert gc.get_threshold() == schedule.previous_thresholds


class _Cycle:
    """An object in a reference cycle."""

    def __init__(self) -> None:
        self.me = self


class _Resident:
    """A process's resident bytes as the test sets them, counting the thread's reads."""

    def __init__(self) -> None:
        self.value = 100 * 2**20
        self.reads = 0

    def __call__(self) -> int:
        self.reads += 1
        return self.value


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60  # a failure guard on a loaded machine, not a bound
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_memory_held_by_a_cycle_is_collected_once_the_process_grew_past_the_bound() -> None:
    resident = _Resident()
    schedule = FullCollections(3600, growth_bytes=32 * 2**20, check_s=0.02, resident=resident)
    try:
        _wait_for(lambda: resident.reads >= 2)  # the baseline and one check
        garbage = weakref.ref(_Cycle())  # unreachable at once, but in a cycle
        read = resident.reads
        _wait_for(lambda: resident.reads >= read + 5)
        assert garbage() is not None  # grown by less than the bound: left to the timer
        resident.value += 32 * 2**20
        _wait_for(lambda: garbage() is None)
        assert garbage() is None  # long before the hour's timer
    finally:
        schedule.stop()


def test_resident_bytes_are_this_processs() -> None:
    before = resident_bytes()
    held = b"x" * (64 * 2**20)
    assert resident_bytes() - before >= 48 * 2**20
    del held


def test_the_heap_is_released_on_its_own_timer() -> None:
    released: list[float] = []
    schedule = FullCollections(
        3600, check_s=0.02, resident=_Resident(),
        release=lambda: released.append(time.monotonic()), release_every_s=0.05,
    )  # fmt: skip
    try:
        _wait_for(lambda: len(released) >= 3)
        assert len(released) >= 3  # with no full collection due
    finally:
        schedule.stop()


def test_the_heap_is_released_after_a_full_collection() -> None:
    resident = _Resident()
    garbage = weakref.ref(_Cycle())
    released: list[bool] = []
    schedule = FullCollections(
        3600, growth_bytes=32 * 2**20, check_s=0.02, resident=resident,
        release=lambda: released.append(garbage() is None), release_every_s=3600,
    )  # fmt: skip
    try:
        _wait_for(lambda: resident.reads >= 5)
        assert released == []  # neither timer is due
        resident.value += 32 * 2**20
        _wait_for(lambda: len(released) == 1)
        assert released == [True]  # once, after the collection freed the cycle
    finally:
        schedule.stop()
