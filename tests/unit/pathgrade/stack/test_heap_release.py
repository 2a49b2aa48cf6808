"""The C heap's free pages go back to the system (glibc, as on the machines we run on)."""

from __future__ import annotations

import threading

from pathgrade.stack.heap_release import release_free_heap
from pathgrade.stack.process_memory import resident_bytes

MB = 2**20


def _allocate_and_free_in_a_thread() -> list[bytes]:
    """~200 MB of medium objects allocated in a thread of their own (its own malloc arena),
    the 150 MB between every fourth freed (pages with a kept object stay); returns what is
    kept."""
    kept: list[bytes] = []

    def work() -> None:
        junk = []
        for n in range(100_000):
            junk.append(bytes(1500))
            if n % 4 == 0:
                kept.append(bytes(2000))
        del junk

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return kept


def test_freed_memory_of_a_threads_arena_is_given_back() -> None:
    kept = _allocate_and_free_in_a_thread()
    before = resident_bytes()
    assert release_free_heap()
    assert before - resident_bytes() >= 25 * MB  # glibc kept it without the trim
    assert len(kept) == 25_000
