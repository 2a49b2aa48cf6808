"""One owner of an embedded store: an exclusive lock on the data directory (which only the
owner's user may enter: it holds the store, the collector's log of every acknowledged
span, the fact key and `stack.json`), and a `stack.json` telling other commands where the
owner answers queries and with which token. Also the broker lease
that keeps direct producers (replay) and a broker swap of the stack apart, and the
processes a crashed owner left running (`stop_stale_processes`)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

LOCK_FILE = "stack.lock"
STATE_FILE = "stack.json"
BROKER_LEASE_FILE = "broker.lease"


class DataDirBusy(RuntimeError):
    """Another running stack owns the data directory."""


class DataDirLock:
    """Holds the data directory's exclusive lock for the life of the owner."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        owner_only(self.data_dir)
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def acquire(self) -> None:
        if not self.try_acquire():
            state = read_state(self.data_dir)
            owner = f" (pid {state['pid']})" if state else ""
            raise DataDirBusy(
                f"{self.data_dir} is owned by another running pathgrade stack{owner}; "
                "stop it or pass another --data-dir"
            )

    def publish_state(self, state: dict[str, Any]) -> None:
        """Write `stack.json`, readable by this user only (it holds the write token)."""
        path = self.data_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps({"pid": os.getpid(), **state}))
        os.replace(tmp, path)

    def release(self) -> None:
        if self._fd is not None:
            (self.data_dir / STATE_FILE).unlink(missing_ok=True)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def owner_only(directory: Path) -> None:
    """Let only its owner's user enter `directory` (mode 0700), when this user owns it: no
    other local account reads the store's files, the collector's log or the keys in it."""
    if directory.stat().st_uid == os.getuid():
        directory.chmod(0o700)


def process_started(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, Linux), which tells it from a
    later process given the same id; None when no such process runs (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: count after it
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])  # a zombie has ended


def stop_stale_processes(state: dict[str, Any], grace_s: float = 5.0) -> list[str]:
    """Stop the processes a `stack.json` left behind by a stack that did not exit lists
    (`pids` with their `started` times) that still run: SIGTERM, then SIGKILL after
    `grace_s`. A process id now used by another process (another start time) is left
    alone. Returns what was stopped, e.g. "collector (pid 1234)"."""
    started = state.get("started") or {}
    stale = [
        (name, pid, started[name])
        for name, pid in (state.get("pids") or {}).items()
        if pid and started.get(name) and process_started(pid) == started[name]
    ]
    for _, pid, _ in stale:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(process_started(p) == t for _, p, t in stale):
        time.sleep(0.1)
    for _, pid, start in stale:
        if process_started(pid) == start:
            _signal(pid, signal.SIGKILL)
    return [f"{name} (pid {pid})" for name, pid, _ in stale]


def _signal(pid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):  # ended meanwhile
        os.kill(pid, sig)


def read_state(data_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((data_dir / STATE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@contextmanager
def broker_lease(data_dir: Path, exclusive: bool, wait: bool = True) -> Iterator[bool]:
    """flock on the data directory's broker lease; yields whether it was taken.

    A command that publishes to the stack's bundled broker itself (replay) holds it shared
    until Kafka acknowledged everything; the stack holds it exclusive while it swaps the
    broker for a fresh one, so nothing is published into a broker about to be discarded.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / BROKER_LEASE_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(fd, mode if wait else mode | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock
