"""Following a running stack's broker across its swaps (`pathgrade scorer --data-dir`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from pathgrade.stack.broker_follow import BrokerWatch, moved_away, stack_broker
from pathgrade.stack.ownership import STATE_FILE


def serving(data_dir: Path, bootstrap: str) -> None:
    (data_dir / STATE_FILE).write_text(json.dumps({"kafka": bootstrap}))


def test_a_swap_to_a_fresh_broker_stops_the_reader_and_names_the_new_address(
    tmp_path: Path,
) -> None:
    serving(tmp_path, "127.0.0.1:1001")
    assert stack_broker(tmp_path) == "127.0.0.1:1001"
    watch = BrokerWatch(tmp_path, "127.0.0.1:1001", threading.Event())
    assert not watch.stop.wait(1.5)  # the same broker: reading goes on
    serving(tmp_path, "127.0.0.1:1002")
    assert watch.stop.wait(30)
    assert watch.moved_to == "127.0.0.1:1002"


def test_a_signal_stops_the_reader_without_a_move(tmp_path: Path) -> None:
    serving(tmp_path, "127.0.0.1:1001")
    signalled = threading.Event()
    watch = BrokerWatch(tmp_path, "127.0.0.1:1001", signalled)
    signalled.set()
    assert watch.stop.wait(30)
    assert watch.moved_to is None


def test_a_stopped_stack_is_no_move(tmp_path: Path) -> None:
    watch = BrokerWatch(tmp_path, "127.0.0.1:1001", threading.Event())
    assert stack_broker(tmp_path) is None and stack_broker(None) is None
    assert not watch.stop.wait(1.5)


def test_the_scorer_without_kafka_and_without_a_stack_says_what_is_missing(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "scorer", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert f"no running stack at {tmp_path}: start one or pass --kafka" in done.stderr


def test_a_readers_error_counts_as_the_swap_only_when_the_broker_moved(tmp_path: Path) -> None:
    serving(tmp_path, "127.0.0.1:1001")
    assert not moved_away(None)
    signalled = threading.Event()
    stopped = BrokerWatch(tmp_path, "127.0.0.1:1001", signalled)
    signalled.set()
    assert not moved_away(stopped)
    swapped = BrokerWatch(tmp_path, "127.0.0.1:1001", threading.Event())
    serving(tmp_path, "127.0.0.1:1002")
    assert moved_away(swapped)
