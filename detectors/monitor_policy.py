"""The policy's `monitors:` section: alerts on what no single turn shows, evaluated over
windows of live traffic (docs/monitors.md; the realtime plane evaluates them,
`realtime_plane.monitors`).

```yaml
monitors:
  every_s: 60                      # how often they are evaluated
  bucket_s: 60                     # the rollups' resolution (windows are whole buckets)
  slices: [app.intent]             # turn attributes whose values the rollups keep
  objectives:                      # burn rate of an objective over a ratio of turns
    - {name: tool-errors, good: no_tool_error, objective: 0.99}
  detector_rates:                  # a detector's rate against a baseline window
    - {name: retry-storms, detector: PG108, window_s: 3600}
  scores:                          # an online score against a baseline window
    - {name: faithfulness, metric: faithfulness, slice: app.intent}
```

Every monitor names itself (`name`, unique), may keep to one `service` and one `agent`,
and with `slice` is evaluated per value of a slice (`service`, `agent` or one of
`slices`), each value an episode of its own. Errors name the field.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pathgrade.detectors.finding import Severity
from pathgrade.detectors.registry import DetectorRef
from pathgrade.schemas.monitors import SPLIT_DIMENSIONS
from pathgrade.schemas.rollups import (
    INCOMPLETE,
    TOOL_ERROR,
    cost_counter,
    finding_counter,
    latency_counter,
)
from pydantic import BaseModel, ConfigDict, Field, model_validator

MONITOR_CODES = {"objective": "PG200", "detector_rate": "PG201", "score": "PG202"}
"""The alert code of each kind of monitor (detectors have PG1xx)."""
WEEK_S = 7 * 86_400


MonitorName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}$")]
Good = Literal["complete", "no_tool_error", "no_finding", "latency_under", "cost_under"]


class MonitorBase(BaseModel):
    """What every monitor has: its name, the traffic it keeps to and how it is split."""

    model_config = ConfigDict(extra="forbid")

    name: MonitorName = Field(
        description="the monitor's name (lower case, digits, `-_.`; unique), in its alerts "
        "and on the alerts page"
    )
    service: str | None = Field(None, description="only this service's turns (none: every one)")
    agent: str | None = Field(None, description="only this agent's turns (none: every one)")
    slice: str | None = Field(
        None,
        description="evaluate separately per value of this slice (`service`, `agent` or one "
        "of `monitors.slices`), each value with episodes of its own; none: all together",
    )


class Baseline(MonitorBase):
    """A window of the current traffic against a baseline window."""

    window_s: int = Field(3600, gt=0, description="length of the current window (seconds)")
    baseline_offset_s: int = Field(
        WEEK_S,
        gt=0,
        description="the baseline is the same window this long before (default: the same "
        "hours a week earlier)",
    )
    baseline_from: dt.datetime | None = Field(
        None, description="a pinned baseline's start (ISO 8601, with `baseline_to`)"
    )
    baseline_to: dt.datetime | None = Field(
        None, description="a pinned baseline's end (ISO 8601, with `baseline_from`)"
    )
    severity: Severity = Field("high", description="severity of its alerts")

    @model_validator(mode="after")
    def _pinned_both_or_neither(self) -> Baseline:
        if (self.baseline_from is None) != (self.baseline_to is None):
            raise ValueError(
                "baseline_from and baseline_to: set both to pin a baseline, or neither"
            )
        start, end = self.baseline_from, self.baseline_to
        if start is not None and end is not None and _utc(end) <= _utc(start):
            raise ValueError("baseline_to must be after baseline_from")
        return self

    def baseline_range(self, start_s: int, end_s: int) -> tuple[int, int]:
        """(start, end) in Unix seconds of the baseline of the window [start_s, end_s)."""
        if self.baseline_from is not None and self.baseline_to is not None:
            return _unix_s(self.baseline_from), _unix_s(self.baseline_to)
        return start_s - self.baseline_offset_s, end_s - self.baseline_offset_s


class BurnWindow(BaseModel):
    """One multi-window burn-rate alert: the burn rate over both windows above `burn_rate`."""

    model_config = ConfigDict(extra="forbid")

    long_s: int = Field(gt=0, description="the long window (seconds): the burn is sustained")
    short_s: int = Field(gt=0, description="the short window (seconds): the burn is still on")
    burn_rate: float = Field(
        gt=0, description="the error budget's burn rate (errors / (1 - objective)) both exceed"
    )
    severity: Severity = Field(description="severity of the alert this pair raises")

    @model_validator(mode="after")
    def _short_within_long(self) -> BurnWindow:
        if self.short_s >= self.long_s:
            raise ValueError("short_s must be shorter than long_s")
        return self


SRE_WINDOWS = (
    BurnWindow(long_s=3600, short_s=300, burn_rate=14.4, severity="critical"),
    BurnWindow(long_s=6 * 3600, short_s=1800, burn_rate=6.0, severity="high"),
)
"""The Site Reliability Workbook's paging pairs for a 30-day objective: 2% of the budget in
an hour, 5% in six hours."""


class ObjectiveMonitor(MonitorBase):
    """An objective over a ratio of good turns, alerted on by multi-window burn rate."""

    good: Good = Field(
        description="what a good turn is: `complete` (evaluated complete, no PG100 finding), "
        "`no_tool_error`, `no_finding` (of `detector`), `latency_under` / `cost_under` "
        "(`budget`: seconds of the top span / USD at list price)"
    )
    detector: DetectorRef | None = Field(None, description="the detector of `no_finding`")
    budget: float | None = Field(
        None, gt=0, description="seconds (`latency_under`) or USD (`cost_under`)"
    )
    objective: float = Field(gt=0, lt=1, description="share of good turns promised, e.g. 0.99")
    windows: list[BurnWindow] = Field(
        default_factory=lambda: list(SRE_WINDOWS),
        min_length=1,
        description="burn-rate pairs; the first that holds raises the alert (default: the SRE "
        "workbook's 1 h / 5 min at 14.4 (critical) and 6 h / 30 min at 6 (high))",
    )
    min_turns: int = Field(
        20, ge=1, description="turns a short window needs before its pair may fire"
    )

    @model_validator(mode="after")
    def _good_needs_its_argument(self) -> ObjectiveMonitor:
        needs_budget = self.good in ("latency_under", "cost_under")
        if needs_budget != (self.budget is not None):
            raise ValueError(f"budget: {'required' if needs_budget else 'only'} with good "
                             "latency_under or cost_under")  # fmt: skip
        if (self.good == "no_finding") != (self.detector is not None):
            raise ValueError("detector: required with good no_finding, and only with it")
        return self

    @property
    def bad_counter(self) -> str:
        """The rollup counter of the turns that are not good (`schemas.rollups`)."""
        return bad_counter(self.good, self.detector, self.budget)

    @property
    def error_budget(self) -> float:
        return 1.0 - self.objective


class DetectorRateMonitor(Baseline):
    """The share of turns with a detector's findings against its baseline, beyond noise."""

    detector: DetectorRef = Field(description="the detector whose findings are counted")
    tolerance: float = Field(
        0.0,
        ge=0,
        le=1,
        description="a rise of the share of turns up to this much is tolerated: the alert "
        "fires when the interval of (current - baseline) lies wholly above it",
    )
    min_turns: int = Field(100, ge=1, description="turns each window needs before it may fire")

    @property
    def counter(self) -> str:
        return finding_counter(self.detector)


class ScoreMonitor(Baseline):
    """The mean of an online score against its baseline, with the gate's bootstrap."""

    metric: str = Field(description="the online scorer's metric (`faithfulness`, ...)")
    max_drop: float = Field(
        0.0,
        ge=0,
        description="a drop of the mean up to this much is tolerated: the alert fires when "
        "the interval of (current - baseline) lies wholly below -max_drop",
    )
    min_samples: int = Field(30, ge=1, description="scores each window needs before it may fire")


Monitor = ObjectiveMonitor | DetectorRateMonitor | ScoreMonitor


class MonitorsPolicy(BaseModel):
    """Monitors over windows of live traffic, and how they are evaluated."""

    model_config = ConfigDict(extra="forbid")

    every_s: int = Field(60, gt=0, description="how often the monitors are evaluated (seconds)")
    bucket_s: int = Field(
        60,
        gt=0,
        description="the rollups' resolution (seconds of turn end time); every window is a "
        "whole number of buckets",
    )
    settle_s: int = Field(
        30,
        ge=0,
        description="windows end this long before now, so late turns (the quiet window, "
        "the rollups' flush, the scorer's judge) are in",
    )
    resolve_after_s: int = Field(
        300,
        ge=0,
        description="an open episode resolves only once its condition has stayed clear this "
        "long (a figure flapping around its threshold stays one episode); 0: at the first "
        "tick it is clear",
    )
    slices: list[str] = Field(
        [],
        description="attributes of a turn's top span whose values the rollups keep, for "
        "monitors' `slice` (send them as allowed keys: docs/collector.md)",
    )
    confidence: float = Field(
        0.99,
        gt=0,
        lt=1,
        description="confidence of the bootstrap intervals (a monitor tests again on every "
        "tick, so higher than the gate's one-off 0.95)",
    )
    resamples: int = Field(5000, ge=100, description="bootstrap resamples per interval")
    examples: int = Field(5, ge=0, le=50, description="example traces an alert links to")
    objectives: list[ObjectiveMonitor] = Field([], description="burn-rate objectives")
    detector_rates: list[DetectorRateMonitor] = Field(
        [], description="detector rates against a baseline"
    )
    scores: list[ScoreMonitor] = Field([], description="online scores against a baseline")

    @model_validator(mode="after")
    def _consistent(self) -> MonitorsPolicy:
        names = [monitor.name for monitor in self.all()]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"monitor names must be unique: {', '.join(repeated)} repeated")
        if set(self.slices) & set(SPLIT_DIMENSIONS):
            raise ValueError("slices: service and agent are always kept; list attributes only")
        for monitor in self.all():
            if monitor.slice and monitor.slice not in (*SPLIT_DIMENSIONS, *self.slices):
                raise ValueError(f"{monitor.name}: slice {monitor.slice!r} is neither service, "
                                 "agent nor in monitors.slices")  # fmt: skip
            for length in _windows(monitor):
                if length % self.bucket_s:
                    raise ValueError(f"{monitor.name}: a window of {length} s is not a whole "
                                     f"number of buckets of {self.bucket_s} s")  # fmt: skip
        return self

    def all(self) -> list[Monitor]:
        """Every monitor, objectives first."""
        return [*self.objectives, *self.detector_rates, *self.scores]

    def latency_budgets(self) -> set[float]:
        return {m.budget for m in self.objectives if m.good == "latency_under" and m.budget}

    def cost_budgets(self) -> set[float]:
        return {m.budget for m in self.objectives if m.good == "cost_under" and m.budget}


def monitor_kind(monitor: Monitor) -> str:
    """`objective`, `detector_rate` or `score`."""
    if isinstance(monitor, ObjectiveMonitor):
        return "objective"
    return "detector_rate" if isinstance(monitor, DetectorRateMonitor) else "score"


def _windows(monitor: Monitor) -> list[int]:
    if isinstance(monitor, ObjectiveMonitor):
        return [length for pair in monitor.windows for length in (pair.long_s, pair.short_s)]
    return [monitor.window_s]


def _utc(moment: dt.datetime) -> dt.datetime:
    """`moment` with its zone: a time without zone is UTC (so it compares with any other)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def _unix_s(moment: dt.datetime) -> int:
    """Unix seconds of `moment` (a time without zone is UTC)."""
    return int(_utc(moment).timestamp())


def bad_counter(good: Good, detector: str | None, budget: float | None) -> str:
    """The counter of the turns that are not `good`."""
    if good == "complete":
        return INCOMPLETE
    if good == "no_tool_error":
        return TOOL_ERROR
    if good == "no_finding":
        assert detector is not None
        return finding_counter(detector)
    assert budget is not None
    return latency_counter(budget) if good == "latency_under" else cost_counter(budget)
