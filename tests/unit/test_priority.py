"""The store writer's thread can be made nicer than the rest of its process (Linux)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from pathgrade.cli import build_parser
from pathgrade.priority import lower_thread_priority

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
