"""Stalls (what a writer waits for, and why; cleared by its next success) and the growing
wait between its retries."""

from __future__ import annotations

import threading

from pathgrade.transport.stalls import Backoff, Stalls


def test_a_stall_is_new_once_per_reason_counted_every_time_and_cleared_by_a_success() -> None:
    stalls = Stalls()
    assert stalls.failed("the durable log", "[Errno 28] No space left on device")
    assert not stalls.failed("the durable log", "[Errno 28] No space left on device")
    assert stalls.failed("the store", "Code: 243. NOT_ENOUGH_SPACE")
    assert stalls.failed("the store", "Code: 210. NETWORK_ERROR")  # another reason: new
    assert stalls.failures == 4
    assert stalls.current() == {
        "the durable log": "[Errno 28] No space left on device",
        "the store": "Code: 210. NETWORK_ERROR",
    }
    assert stalls.cleared("the durable log")
    assert not stalls.cleared("the durable log")  # logged once: it was stalled
    assert stalls.current() == {"the store": "Code: 210. NETWORK_ERROR"}
    assert stalls.failures == 4  # a count of failures, not of stalls


def test_a_reason_is_one_bounded_line() -> None:
    stalls = Stalls()
    stalls.failed("the store", "insert failed:\n  Code: 243.\n" + "x" * 1000)
    (reason,) = stalls.current().values()
    assert reason.startswith("insert failed: Code: 243. xxx") and len(reason) == 300


def test_failures_from_many_threads_are_all_counted() -> None:
    stalls = Stalls()
    threads = [
        threading.Thread(target=lambda: [stalls.failed("x", "y") for _ in range(1000)])
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stalls.failures == 8000


def test_the_wait_doubles_up_to_its_bound_and_starts_again_after_a_success() -> None:
    backoff = Backoff(first_s=0.5, max_s=3.0)
    assert [backoff.next_s() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next_s() == 0.5
