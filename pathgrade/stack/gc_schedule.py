"""Full garbage collections on a timer instead of allocation counts.

pathgrade's long-running processes keep large, churning structures (the realtime plane's
trace buffers, recent traces, conversation turns and their views; the store writer's
batches). CPython then runs a full (generation 2) collection every few seconds, each one
scanning every tracked object while holding the interpreter lock: on 100k demo spans the
realtime plane's work paused 8 times for up to 0.8 s, ~20% of the pass, and those pauses
were the tail of the alert latency (bench/realtime_gc.py: on the timer the same pass takes
0.77-0.92 of the time). Young generations stay automatic (a few ms each); the full
collection runs every `FULL_COLLECTION_INTERVAL_S` from a daemon thread, so cyclic garbage
(rare here: the data is acyclic and reference counting frees it) waits at most that long.
"""

from __future__ import annotations

import gc
import threading

FULL_COLLECTION_INTERVAL_S = 300.0
_NEVER = 1_000_000_000  # a generation-2 threshold no process reaches


class FullCollections:
    """The timer thread of `schedule_full_collections`; `stop()` restores the thresholds."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.previous_thresholds = gc.get_threshold()
        self._stop = threading.Event()
        young, middle, _ = self.previous_thresholds
        gc.set_threshold(young, middle, _NEVER)
        self._thread = threading.Thread(target=self._run, name="full-gc", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            gc.collect()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        gc.set_threshold(*self.previous_thresholds)


def schedule_full_collections(interval_s: float = FULL_COLLECTION_INTERVAL_S) -> FullCollections:
    """Stop automatic full collections in this process and run one every `interval_s`."""
    return FullCollections(interval_s)
