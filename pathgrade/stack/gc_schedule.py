"""Full garbage collections on a timer and on memory growth instead of allocation counts,
and the C heap's free pages given back to the system.

pathgrade's long-running processes keep large, churning structures (the realtime plane's
trace buffers, recent traces, conversation turns and their views; the store writer's
batches). CPython then runs a full (generation 2) collection every few seconds, each one
scanning every tracked object while holding the interpreter lock: on 100k demo spans the
realtime plane's work paused 8 times for up to 0.8 s, ~20% of the pass, and those pauses
were the tail of the alert latency (bench/realtime_gc.py: on the timer the same pass takes
0.77-0.92 of the time). Young generations stay automatic (a few ms each); the full
collection runs from a daemon thread every `FULL_COLLECTION_INTERVAL_S`, or earlier once
the process's resident memory grew `GROWTH_COLLECTION_BYTES` since the last one. Our own
data is acyclic (reference counting frees it), but a library's reference cycle can hold
much: clickhouse-connect's insert context held every inserted row until the timer's
collection (docs/scale.md, "The store owner's saw-tooth"). The growth check bounds what
such garbage holds in bytes, not only in time; a process whose memory is steady never
collects early. After each full collection and every `HEAP_RELEASE_INTERVAL_S` the same
thread gives the C heap's free pages back to the system (`heap_release`): glibc keeps them
per thread arena otherwise.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

from pathgrade.stack.heap_release import release_free_heap
from pathgrade.stack.process_memory import resident_bytes

FULL_COLLECTION_INTERVAL_S = 300.0
HEAP_RELEASE_INTERVAL_S = 30.0
GROWTH_COLLECTION_BYTES = 512 * 2**20
GROWTH_CHECK_S = 5.0
_NEVER = 1_000_000_000  # a generation-2 threshold no process reaches


class FullCollections:
    """The thread of `schedule_full_collections`; `stop()` restores the thresholds."""

    def __init__(
        self,
        interval_s: float,
        growth_bytes: int = GROWTH_COLLECTION_BYTES,
        check_s: float = GROWTH_CHECK_S,
        resident: Callable[[], int] = resident_bytes,
        release: Callable[[], object] = release_free_heap,
        release_every_s: float = HEAP_RELEASE_INTERVAL_S,
    ) -> None:
        self.interval_s = interval_s
        self.growth_bytes = growth_bytes
        self.check_s = min(check_s, interval_s, release_every_s)
        self.resident = resident
        self.release = release
        self.release_every_s = release_every_s
        self.previous_thresholds = gc.get_threshold()
        self._stop = threading.Event()
        young, middle, _ = self.previous_thresholds
        gc.set_threshold(young, middle, _NEVER)
        self._thread = threading.Thread(target=self._run, name="full-gc", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        collected_at = released_at = time.monotonic()
        resident_after = self.resident()
        while not self._stop.wait(self.check_s):
            now = time.monotonic()
            due = now - collected_at >= self.interval_s
            if due or self.resident() - resident_after >= self.growth_bytes:
                gc.collect()
                self.release()
                collected_at = released_at = time.monotonic()
                resident_after = self.resident()
            elif now - released_at >= self.release_every_s:
                self.release()
                released_at = now

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        gc.set_threshold(*self.previous_thresholds)


def schedule_full_collections(
    interval_s: float = FULL_COLLECTION_INTERVAL_S, growth_bytes: int = GROWTH_COLLECTION_BYTES
) -> FullCollections:
    """Stop automatic full collections in this process and run one every `interval_s`, or
    once its resident memory grew `growth_bytes` since the last; give the C heap's free
    pages back after each and every `HEAP_RELEASE_INTERVAL_S`."""
    return FullCollections(interval_s, growth_bytes)
