"""Full garbage collections run on the timer, not on allocation counts."""

from __future__ import annotations

import gc
import itertools
import time

from pathgrade.stack.gc_schedule import schedule_full_collections


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
