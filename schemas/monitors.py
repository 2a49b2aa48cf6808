"""What a monitor found at one evaluation (`MonitorTick`, a row of table `monitor_ticks`),
and the keys of a monitor alert's details (docs/monitors.md, How an alert reads).

A monitor is evaluated per tenant and scope: `""` for all the traffic it keeps to, or one
value of its slice (`service=billing`, `app.intent=refund`). Its `figure` is what is held
against its `threshold`: an objective's burn rate (over the shorter window of its first
pair that holds data), a detector rate's or a score's difference from the baseline (with
its bootstrap interval `low`..`high`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

SPLIT_DIMENSIONS = ("service", "agent")
"""Splits every turn and score has without a slice in the policy: by service, by agent."""
MonitorState = Literal["ok", "firing", "no_data"]
EpisodeState = Literal["firing", "resolved"]

MONITOR_TICK_COLUMNS: tuple[str, ...] = (
    "Tenant", "Monitor", "Kind", "Scope", "Service", "Agent", "TickNs", "WindowStartNs",
    "WindowEndNs", "Figure", "Threshold", "Low", "High", "Current", "Baseline", "Items",
    "BaselineItems", "State", "Episode", "Details",
)  # fmt: skip
"""Column order of table `monitor_ticks` (schemas/migrations/0016_monitors.sql)."""

# Keys of a monitor alert's `details` (besides the figures): what its episode is.
MONITOR = "monitor"
MONITOR_KIND = "monitor_kind"
SCOPE = "scope"
STATE = "state"
EPISODE = "episode"
OPENED_NS = "opened_ns"


@dataclass(frozen=True)
class MonitorTick:
    """One monitor's figures for one tenant and scope at one evaluation."""

    tenant: str
    monitor: str
    kind: str  # objective, detector_rate, score
    scope: str
    service: str  # the monitor's service filter ("" for all)
    agent: str
    tick_ns: int
    window_start_ns: int
    window_end_ns: int
    figure: float | None  # None: too little data to decide
    threshold: float
    low: float | None = None
    high: float | None = None
    current: float | None = None
    baseline: float | None = None
    items: int = 0
    baseline_items: int = 0
    state: MonitorState = "no_data"
    episode: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def row(self) -> list[Any]:
        """This tick as a row of `monitor_ticks`, in MONITOR_TICK_COLUMNS order."""
        return [
            self.tenant, self.monitor, self.kind, self.scope, self.service, self.agent,
            self.tick_ns, self.window_start_ns, self.window_end_ns, self.figure,
            self.threshold, self.low, self.high, self.current, self.baseline, self.items,
            self.baseline_items, self.state, self.episode,
            json.dumps(self.details, sort_keys=True),
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MonitorTick:
        """The tick of a `monitor_ticks` row read back as a mapping of its columns."""
        return cls(
            tenant=row["Tenant"], monitor=row["Monitor"], kind=row["Kind"], scope=row["Scope"],
            service=row["Service"], agent=row["Agent"], tick_ns=int(row["TickNs"]),
            window_start_ns=int(row["WindowStartNs"]), window_end_ns=int(row["WindowEndNs"]),
            figure=row["Figure"], threshold=row["Threshold"], low=row["Low"],
            high=row["High"], current=row["Current"], baseline=row["Baseline"],
            items=int(row["Items"]), baseline_items=int(row["BaselineItems"]),
            state=row["State"], episode=row["Episode"],
            details=json.loads(row["Details"] or "{}"),
        )  # fmt: skip


@dataclass(frozen=True)
class RollupSelection:
    """Which rollups a monitor sums: a source (`turns`, `scores`), counter names, the
    traffic it keeps to (None: any) and how it is split into scopes (`split`: None, one of
    SPLIT_DIMENSIONS, or the name of a slice the policy keeps)."""

    source: str
    names: tuple[str, ...]
    service: str | None = None
    agent: str | None = None
    split: str | None = None


@dataclass(frozen=True, slots=True)
class BucketCount:
    """The sum of one counter (and value) in one bucket, for one tenant and scope."""

    tenant: str
    scope: str
    name: str
    bucket_start_s: int
    value: float
    count: int


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """The latest stored monitor alert of one (tenant, monitor, scope): its episode."""

    tenant: str
    monitor: str
    scope: str
    state: str  # firing, resolved
    episode: str
    opened_ns: int
    alert_key: str
