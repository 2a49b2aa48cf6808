"""The store writer's thread can be made nicer than the rest of its process (Linux)."""

from __future__ import annotations

import _thread
import os
import sys
import threading
import time

import pytest

from pathgrade.cli.main import build_parser
from pathgrade.stack.priority import (
    keep_native_threads_lowered,
    lower_native_threads,
    lower_thread_priority,
)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice")


def nice_of(thread_id: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, thread_id)


@linux_only
def test_only_the_calling_thread_gets_nicer() -> None:
    main_before = nice_of(threading.get_native_id())
    seen: dict[str, int] = {}

    def work() -> None:
        seen["applied"] = lower_thread_priority(7)
        seen["nice"] = nice_of(threading.get_native_id())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == {"applied": True, "nice": min(19, main_before + 7)}
    assert nice_of(threading.get_native_id()) == main_before


class NativeThread:
    """A thread started below `threading`, as a native library starts its own: it is not
    in `threading.enumerate()`."""

    def __init__(self) -> None:
        self.native_id = 0
        self._release = _thread.allocate_lock()
        self._release.acquire()
        started = _thread.allocate_lock()
        started.acquire()

        def body() -> None:
            self.native_id = _thread.get_native_id()
            started.release()
            self._release.acquire()

        _thread.start_new_thread(body, ())
        started.acquire()

    def stop(self) -> None:
        self._release.release()


@linux_only
def test_threads_python_did_not_start_get_nicer_and_python_threads_do_not() -> None:
    main_nice = nice_of(threading.get_native_id())
    native = NativeThread()
    python_started, release = threading.Event(), threading.Event()
    python_ids: list[int] = []

    def python_thread() -> None:
        python_ids.append(threading.get_native_id())
        python_started.set()
        release.wait(10)

    thread = threading.Thread(target=python_thread)
    thread.start()
    python_started.wait(10)
    try:
        assert lower_native_threads(5) >= 1  # other tests may have left native threads
        assert nice_of(native.native_id) == min(19, main_nice + 5)
        assert nice_of(python_ids[0]) == main_nice
        assert nice_of(threading.get_native_id()) == main_nice
        lower_native_threads(5)  # again: relative to the process, not to the thread's own
        assert nice_of(native.native_id) == min(19, main_nice + 5)
    finally:
        release.set()
        thread.join()
        native.stop()


@linux_only
def test_native_threads_started_later_are_lowered_on_the_next_round() -> None:
    main_nice = nice_of(threading.get_native_id())
    stop = threading.Event()
    keeper = keep_native_threads_lowered(4, stop, interval_s=0.05)
    assert keeper is not None
    native = NativeThread()  # started after the first round, as a lazily grown pool's thread
    try:
        deadline = time.monotonic() + 5
        while nice_of(native.native_id) == main_nice and time.monotonic() < deadline:
            time.sleep(0.02)
        assert nice_of(native.native_id) == min(19, main_nice + 4)
    finally:
        stop.set()
        keeper.join(5)
        native.stop()
    assert not keeper.is_alive()
    assert keep_native_threads_lowered(0, stop) is None


def test_zero_changes_nothing() -> None:
    before = nice_of(threading.get_native_id())
    assert lower_thread_priority(0) is False
    assert nice_of(threading.get_native_id()) == before


def test_the_flag_takes_0_to_19_only(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["up", "--store-writer-nice", "0"]).store_writer_nice == 0
    assert parser.parse_args(["up"]).store_writer_nice == 19
    with pytest.raises(SystemExit):
        parser.parse_args(["up", "--store-writer-nice", "25"])
    assert "--store-writer-nice: expected 0..19" in capsys.readouterr().err
