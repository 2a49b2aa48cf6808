"""The names of pathgrade's Prometheus metrics: shared by the exporter every box serves
(`pathgrade.stack.metrics`), the UI's scrape of a box's `/metrics` and the alerting rules
the monitors generate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pathgrade.realtime_plane.delays import MAX, P50, P99
from pathgrade.schemas.stalls import STALLED

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
GAUGES = frozenset(
    {"traces_held", "spans_held", "spill_bytes", "log_bytes", "dead_letter_messages"}
    | {"rss_bytes", "coverage_ratio", "failing", P50, P99, MAX, STALLED}
)
"""Counter names that are levels, not cumulative counts."""

Sample = tuple[str, Mapping[str, str], Mapping[str, Any]]
"""(process, labels, counter name -> number); values that are not numbers are skipped."""


def metric_name(process: str, counter: str) -> str:
    """`pathgrade_<process>_<counter>`, with `_total` unless the counter is a level."""
    return f"pathgrade_{process}_{counter}" + ("" if counter in GAUGES else "_total")
