"""One owner of an embedded store: an exclusive lock on the data directory, and a
`stack.json` telling other commands where the owner answers queries. Also the broker lease
that keeps direct producers (replay) and a broker swap of the stack apart."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
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
        self.data_dir.mkdir(parents=True, exist_ok=True)
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
        path = self.data_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), **state}))
        os.replace(tmp, path)

    def release(self) -> None:
        if self._fd is not None:
            (self.data_dir / STATE_FILE).unlink(missing_ok=True)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


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
