"""What a crashed stack left running is recognised by process id and start time, and
stopped; a process id now used by another program is left alone. The data directory is
the owner's only."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from pathgrade.stack.ownership import DataDirLock, process_started, stop_stale_processes

STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ignoring SIGTERM', flush=True); time.sleep(300)"
)


def test_stale_processes_are_stopped_and_a_reused_pid_is_not() -> None:
    stale = subprocess.Popen(["sleep", "300"])
    stubborn = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ignoring SIGTERM\n"
    reused = subprocess.Popen(["sleep", "300"])
    try:
        state = {
            "pids": {"collector": stale.pid, "realtime": stubborn.pid, "other": reused.pid,
                     "broker": None},
            "started": {"collector": process_started(stale.pid),
                        "realtime": process_started(stubborn.pid),
                        "other": (process_started(reused.pid) or 0) + 1, "broker": None},
        }  # fmt: skip
        stopped = stop_stale_processes(state, grace_s=1.0)
        assert stopped == [f"collector (pid {stale.pid})", f"realtime (pid {stubborn.pid})"]
        assert stale.wait(timeout=30) == -15 and stubborn.wait(timeout=30) == -9
        assert reused.poll() is None
        assert stop_stale_processes({"pids": {"collector": stale.pid}}) == []  # no start time
    finally:
        for process in (stale, stubborn, reused):
            process.kill()
            process.wait()


def test_an_ended_process_has_no_start_time() -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    assert process_started(ended.pid) is None


def test_the_data_directory_and_its_state_are_the_owners_only(tmp_path: Path) -> None:
    """A new data directory, and an existing one another version left open, become
    enterable by the owner's user only; `stack.json`, with the token, is its to read."""
    fresh, existing = tmp_path / "fresh" / "data", tmp_path / "existing"
    existing.mkdir(mode=0o755)
    for directory in (fresh, existing):
        lock = DataDirLock(directory)
        assert lock.try_acquire()
        lock.publish_state({"token": "t"})
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert stat.S_IMODE((directory / "stack.json").stat().st_mode) == 0o600
        lock.release()
