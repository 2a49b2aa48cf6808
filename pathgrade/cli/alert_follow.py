"""`pathgrade alerts --follow`: new alerts from the store as they are stored, each once.

Realtime consumers store their alerts in batches, each on its own schedule, so an alert
detected earlier can be stored after one detected later. Every poll therefore reads back
a trailing window (`LATE_WINDOW_S`) behind the newest detection seen, and an alert key
already printed is not printed again (keys older than the window are forgotten).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pathgrade.batch_plane.store.alerts import follow_statement
from pathgrade.schemas.store import QueryResult

LATE_WINDOW_S = 60.0  # how late an alert may be stored after a later one and still show


class AlertFollower:
    """Which stored alerts are new: `fresh(result)` keeps the rows of `follow_statement` not
    printed before and moves the window on."""

    def __init__(self, start_ns: int, window_s: float = LATE_WINDOW_S) -> None:
        self.start_ns = start_ns
        self.window_ns = int(window_s * 1e9)
        self.newest_ns = start_ns
        self._printed: dict[str, int] = {}  # alert key -> detected at (ns)

    @property
    def since_ns(self) -> int:
        """Where the next poll starts reading: the window behind the newest seen, never
        before `start_ns`."""
        return max(self.start_ns, self.newest_ns - self.window_ns)

    def fresh(self, result: QueryResult) -> QueryResult:
        """The rows (without key and ns columns) of alerts not printed before."""
        rows = []
        for key, detected_ns, *shown in result.rows:
            if key in self._printed:
                continue
            self._printed[key] = detected_ns
            self.newest_ns = max(self.newest_ns, detected_ns)
            rows.append(shown)
        horizon = self.since_ns
        self._printed = {k: t for k, t in self._printed.items() if t >= horizon}
        return QueryResult(result.columns[2:], result.types[2:], rows)


def follow(
    query: Callable[[str, dict[str, Any]], QueryResult],
    code: str | None,
    start_ns: int,
    emit: Callable[[QueryResult], None],
    wait: Callable[[float], bool],
    interval_s: float = 1.0,
) -> None:
    """Poll `query` every `interval_s` and `emit` the alerts detected since `start_ns`
    not emitted before, oldest first, until `wait` returns True (stop requested)."""
    follower = AlertFollower(start_ns)
    sql = follow_statement(code)
    while True:
        parameters: dict[str, Any] = {"since": follower.since_ns}
        if code:
            parameters["code"] = code
        new = follower.fresh(query(sql, parameters))
        if new.rows:
            emit(new)
        if wait(interval_s):
            return
