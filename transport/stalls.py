"""What a writer waiting for a resource reports while it waits, and how long it waits.

A writer that fails on a resource (a full disk, a store refusing inserts, a broker gone)
keeps what it has, retries after a `Backoff` and reports itself stalled meanwhile
(`Stalls`): what is stalled and why, under the `schemas.stalls.STALLED` key of its
process's counters, and how many writes failed under `schemas.stalls.WRITE_FAILURES`. The
stack's status line, `pathgrade status`, `/metrics` and the browser UI's banner show both;
a stall is cleared by the writer's next success.
"""

from __future__ import annotations

import threading

FIRST_RETRY_S = 0.5
MAX_RETRY_S = 10.0
_MAX_REASON_CHARS = 300


class Stalls:
    """The stalls of one process (what -> why) and its write failures; thread-safe."""

    def __init__(self) -> None:
        self._current: dict[str, str] = {}
        self.failures = 0
        self._lock = threading.Lock()

    def failed(self, what: str, why: str) -> bool:
        """Record a failed write of `what`; True when `what` was not stalled yet (or for
        another reason), so the caller logs each new stall once."""
        reason = " ".join(why.split())[:_MAX_REASON_CHARS]
        with self._lock:
            self.failures += 1
            new = self._current.get(what) != reason
            self._current[what] = reason
        return new

    def cleared(self, what: str) -> bool:
        """`what` wrote again; True when it was stalled (the caller logs its recovery)."""
        with self._lock:
            return self._current.pop(what, None) is not None

    def current(self) -> dict[str, str]:
        """What is stalled now, and why."""
        with self._lock:
            return dict(self._current)


class Backoff:
    """The waits between retries of one failing step: `first_s`, doubling up to `max_s`,
    from the first again after `reset` (a success)."""

    def __init__(self, first_s: float = FIRST_RETRY_S, max_s: float = MAX_RETRY_S) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._next_s = first_s

    def next_s(self) -> float:
        """The wait before the next retry (each call doubles the one after)."""
        wait = self._next_s
        self._next_s = min(self.max_s, wait * 2)
        return wait

    def reset(self) -> None:
        self._next_s = self.first_s
