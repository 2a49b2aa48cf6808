"""Thread priority: the embedded stack's store writer yields the CPU to the alert path.

On a saturated machine every process of `pathgrade up` competes for the cores. Alerts are
latency-bound (seconds), the store writer is throughput-bound (it inserts in batches and
Kafka holds what it has not read), so the writer's thread runs at a higher nice value: it
takes what the collector and the realtime plane leave and catches up after a burst
(bench/realtime.py, 3,000 spans/s on 2 cores: alert p99 1.6 s with the writer at nice 19,
3.4-4.4 s at the same priority). The threads chDB starts for itself when the store opens
(merges, background schedules, pools) would still run at the process's priority, so they
are lowered too, and again every few seconds for the pool threads chDB grows later
(`keep_native_threads_lowered`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)


def _lowering_applies(niceness: int) -> bool:
    """True when there is something to lower: a positive niceness, on Linux (where a thread
    is a task with its own nice value)."""
    return niceness > 0 and sys.platform.startswith("linux")


def lower_thread_priority(niceness: int) -> bool:
    """Raise the calling thread's nice value by `niceness` (capped at 19); threads it starts
    later inherit it. Linux only (a thread is a task with its own nice value there); False
    where it did nothing."""
    if not _lowering_applies(niceness):
        return False
    thread = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + niceness))
    except OSError as exc:
        log.warning("could not lower the priority of this thread: %s", exc)
        return False
    return True


def lower_native_threads(niceness: int) -> int:
    """Make this process's threads that Python did not start (chDB's MergeMutate, BgSchPool,
    ThreadPool, ...) `niceness` nicer than the process (capped at 19); threads they start
    later inherit it. Returns how many threads it lowered; 0 off Linux."""
    if not _lowering_applies(niceness):
        return 0
    python_threads = {thread.native_id for thread in threading.enumerate()}
    target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + niceness)
    lowered = 0
    for task in Path("/proc/self/task").iterdir():
        thread = int(task.name)
        if thread in python_threads:
            continue
        try:
            if os.getpriority(os.PRIO_PROCESS, thread) < target:
                os.setpriority(os.PRIO_PROCESS, thread, target)
                lowered += 1
        except OSError:  # the thread ended meanwhile, or the system refused
            continue
    return lowered


NATIVE_THREADS_INTERVAL_S = 5.0
"""How often `keep_native_threads_lowered` looks for new native threads."""


def keep_native_threads_lowered(
    niceness: int, stop: threading.Event, interval_s: float = NATIVE_THREADS_INTERVAL_S
) -> threading.Thread | None:
    """`lower_native_threads(niceness)` now and every `interval_s` until `stop` is set, from a
    daemon thread (a native library grows its pools lazily, from threads of any priority).
    None when there is nothing to lower (niceness 0, or not Linux)."""
    if not _lowering_applies(niceness):
        return None

    def run() -> None:
        while True:
            lower_native_threads(niceness)
            if stop.wait(interval_s):
                return

    thread = threading.Thread(target=run, name="native-threads-nice", daemon=True)
    thread.start()
    return thread
