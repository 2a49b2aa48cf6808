"""Detection delay: from the collector's receipt of a trace's last span to the trace's
evaluation. It holds the quiet window (default 1 s) plus everything pathgrade adds: Kafka,
the consumer's backlog, decoding and the detectors. Agents' own export delays (a batch
span processor holds spans up to 5 s by default) are not in it, and neither are traces
evaluated early (maximum age, memory bound) or again (late spans).
"""

from __future__ import annotations

import math
from collections import deque

DELAY_WINDOW = 2048
"""How many of the latest delays the quantiles are taken over."""
P50, P99, MAX = (
    "detection_delay_p50_seconds",
    "detection_delay_p99_seconds",
    "detection_delay_max_seconds",
)
"""The names `quantiles()` reports them under (levels, not counts)."""


class DelayWindow:
    """The latest detection delays (seconds) and their p50, p99 and maximum."""

    def __init__(self, size: int = DELAY_WINDOW) -> None:
        self._delays: deque[float] = deque(maxlen=size)

    def add(self, seconds: float) -> None:
        """Note one trace's delay."""
        self._delays.append(seconds)

    def quantiles(self) -> dict[str, float]:
        """P50, P99 and MAX over the window (nearest rank, in seconds to the millisecond);
        empty before the first delay."""
        if not self._delays:
            return {}
        ordered = sorted(self._delays)

        def rank(q: float) -> float:
            return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 3)

        return {P50: rank(0.50), P99: rank(0.99), MAX: rank(1.0)}
