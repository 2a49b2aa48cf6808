"""Reading a topic until it is drained: before a broker's data ends, consumers read on
after their targets until nothing comes for a while."""

from __future__ import annotations

import time
from collections.abc import Callable

DRAIN_IDLE_S = 0.5
"""Before a broker's data ends (the embedded stack stopping or swapping it), consumers
read on after their targets until nothing came for this long."""


def read_until_drained(
    poll: Callable[[], int], caught_up: Callable[[], bool], timeout_s: float, idle_s: float = 0.0
) -> None:
    """Call `poll` (it returns how many messages it read) until `caught_up()`, then, with
    `idle_s`, on until its polls read nothing for `idle_s` (what other producers wrote,
    before a broker's data ends); gives up after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        if not caught_up():
            poll()
            continue
        if not idle_s:
            return
        read = poll()
        now = time.monotonic()
        if read or quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= idle_s:
            return
