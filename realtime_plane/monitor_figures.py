"""What a monitor's windows say, per tenant and scope, from the rollups' bucket counts
(pure: the reads are the caller's, `realtime_plane.monitors`).

- An objective (`ObjectiveMonitor`): for each burn-rate pair, the share of bad turns over
  its long and its short window divided by the error budget (1 - objective); a pair holds
  when both burn rates are above its `burn_rate` and the short window holds `min_turns`.
  Its figure is the smaller of the first pair's two burn rates (what the threshold is held
  against), its window that pair's short one.
- A detector rate (`DetectorRateMonitor`): the share of turns with the detector's findings
  in the current window minus the baseline's, with the unpaired bootstrap interval of that
  difference; it holds when the whole interval lies above `tolerance`.
- A score (`ScoreMonitor`): the mean of the metric's online scores in the current window
  minus the baseline's, with the same interval; it holds when the whole interval lies
  below `-max_drop`.

A window with too little data (`min_turns`, `min_samples`) decides nothing: it neither
fires nor resolves (docs/monitors.md, Episodes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pathgrade.detectors.finding import Severity
from pathgrade.detectors.monitor_policy import (
    Baseline,
    DetectorRateMonitor,
    Monitor,
    MonitorsPolicy,
    ObjectiveMonitor,
    ScoreMonitor,
)
from pathgrade.schemas.monitors import BucketCount, RollupSelection
from pathgrade.schemas.rollups import TURNS
from pathgrade.stats.bootstrap import DEFAULT_SEED, WeightedSample, difference_interval

Scope = tuple[str, str]  # (tenant, scope)


@dataclass
class Figures:
    """One monitor's figures for one tenant and scope at one tick."""

    tenant: str
    scope: str
    figure: float | None  # what `threshold` is held against (None: nothing to show)
    threshold: float
    holds: bool  # the alert's condition holds (never without enough data)
    decided: bool  # enough data to decide
    severity: Severity
    window: tuple[int, int]  # (start, end) Unix seconds of the window shown
    items: int  # turns or scores in it
    low: float | None = None  # the bootstrap interval of `figure`
    high: float | None = None
    current: float | None = None  # the share or mean of the current window
    baseline: float | None = None  # the baseline's (an objective's: the error budget)
    baseline_items: int = 0
    baseline_window: tuple[int, int] | None = None
    details: dict[str, Any] = field(default_factory=dict)
    examples: RollupSelection | None = None  # the rollups whose examples the alert links


def window_end(now_s: float, monitors: MonitorsPolicy) -> int:
    """The end (Unix seconds) of every window evaluated at `now_s`: `settle_s` before now,
    at a bucket boundary."""
    end = int(now_s) - monitors.settle_s
    return end - end % monitors.bucket_s


def selection(monitor: Monitor, names: tuple[str, ...]) -> RollupSelection:
    """The monitor's rollups of counters `names`."""
    source = "scores" if isinstance(monitor, ScoreMonitor) else "turns"
    return RollupSelection(source, names, monitor.service, monitor.agent, monitor.slice)


def objective_selection(monitor: ObjectiveMonitor) -> RollupSelection:
    return selection(monitor, (TURNS, monitor.bad_counter))


def objective_span(monitor: ObjectiveMonitor) -> int:
    """Seconds of rollups an objective reads: its longest window."""
    return max(pair.long_s for pair in monitor.windows)


def objective_figures(
    monitor: ObjectiveMonitor, counts: Iterable[BucketCount], end_s: int
) -> list[Figures]:
    """Per tenant and scope seen in the objective's longest window ending at `end_s`."""
    bad = monitor.bad_counter
    by_scope = _by_scope(counts)
    out = []
    for (tenant, scope), buckets in sorted(by_scope.items()):
        pairs = [_pair(monitor, pair, buckets, bad, end_s) for pair in monitor.windows]
        holding = next((p for p in pairs if p["holds"]), None)
        shown = holding or pairs[0]
        first = pairs[0]
        decided = first["short"]["turns"] >= monitor.min_turns
        short = shown["short"]
        figures = Figures(
            tenant, scope,
            figure=min(first["long"]["burn"], first["short"]["burn"]) if decided else None,
            threshold=first["burn_rate"], holds=holding is not None,
            decided=decided or holding is not None, severity=shown["severity"],
            window=(end_s - shown["short_s"], end_s), items=short["turns"],
            current=short["bad"] / short["turns"] if short["turns"] else None,
            baseline=monitor.error_budget, details={"pairs": pairs},
            examples=selection(monitor, (bad,)),
        )  # fmt: skip
        out.append(figures)
    return out


def _pair(
    monitor: ObjectiveMonitor, pair: Any, buckets: dict[str, dict[int, int]], bad: str, end_s: int
) -> dict[str, Any]:
    """One burn-rate pair's windows: turns, bad turns and burn rate of each, and whether the
    pair holds."""
    windows = {}
    for label, length in (("long", pair.long_s), ("short", pair.short_s)):
        turns = _sum(buckets.get(TURNS, {}), end_s - length, end_s)
        errors = _sum(buckets.get(bad, {}), end_s - length, end_s)
        burn = errors / turns / monitor.error_budget if turns else 0.0
        windows[label] = {"turns": turns, "bad": errors, "burn": burn}
    holds = windows["short"]["turns"] >= monitor.min_turns and all(
        windows[w]["burn"] > pair.burn_rate for w in ("long", "short")
    )
    return {
        "long_s": pair.long_s, "short_s": pair.short_s, "burn_rate": pair.burn_rate,
        "severity": pair.severity, **windows, "holds": holds,
    }  # fmt: skip


def rate_figures(
    monitor: DetectorRateMonitor,
    current: Iterable[BucketCount],
    baseline: Iterable[BucketCount],
    end_s: int,
    monitors: MonitorsPolicy,
) -> list[Figures]:
    """Per tenant and scope seen in either window."""
    now, before = _by_scope(current), _by_scope(baseline)
    window, baseline_window = _windows(monitor, end_s)
    out = []
    for key in sorted(now.keys() | before.keys()):
        n_now, k_now = _totals(now.get(key, {}), TURNS), _totals(now.get(key, {}), monitor.counter)
        n_base = _totals(before.get(key, {}), TURNS)
        k_base = _totals(before.get(key, {}), monitor.counter)
        figures = Figures(
            *key, figure=None, threshold=monitor.tolerance, holds=False, decided=False,
            severity=monitor.severity, window=window, items=n_now,
            current=k_now / n_now if n_now else None,
            baseline=k_base / n_base if n_base else None, baseline_items=n_base,
            baseline_window=baseline_window,
            details={"hits": k_now, "baseline_hits": k_base, "detector": monitor.detector},
            examples=selection(monitor, (monitor.counter,)),
        )  # fmt: skip
        if figures.current is not None and figures.baseline is not None:
            figures.figure = figures.current - figures.baseline
        if n_now >= monitor.min_turns and n_base >= monitor.min_turns:
            samples = (
                WeightedSample.proportion(k_now, n_now),
                WeightedSample.proportion(k_base, n_base),
            )
            _decide(figures, samples, monitors, above=monitor.tolerance)
        out.append(figures)
    return out


def score_figures(
    monitor: ScoreMonitor,
    current: Iterable[BucketCount],
    baseline: Iterable[BucketCount],
    end_s: int,
    monitors: MonitorsPolicy,
) -> list[Figures]:
    """Per tenant and scope seen in either window."""
    now, before = _histograms(current), _histograms(baseline)
    window, baseline_window = _windows(monitor, end_s)
    out = []
    for key in sorted(now.keys() | before.keys()):
        sample, base = WeightedSample.of(now.get(key, {})), WeightedSample.of(before.get(key, {}))
        figures = Figures(
            *key, figure=None, threshold=-monitor.max_drop, holds=False, decided=False,
            severity=monitor.severity, window=window, items=sample.size,
            current=sample.mean() if sample.size else None,
            baseline=base.mean() if base.size else None, baseline_items=base.size,
            baseline_window=baseline_window, details={"metric": monitor.metric},
            examples=selection(monitor, (monitor.metric,)),
        )  # fmt: skip
        if figures.current is not None and figures.baseline is not None:
            figures.figure = figures.current - figures.baseline
        if sample.size >= monitor.min_samples and base.size >= monitor.min_samples:
            _decide(figures, (sample, base), monitors, below=-monitor.max_drop)
        out.append(figures)
    return out


def _decide(
    figures: Figures,
    samples: tuple[WeightedSample, WeightedSample],
    monitors: MonitorsPolicy,
    above: float | None = None,
    below: float | None = None,
) -> None:
    """The bootstrap interval of (current - baseline); the condition holds when it lies
    wholly above `above` (a rise) or wholly below `below` (a drop)."""
    low, high = difference_interval(
        *samples, resamples=monitors.resamples, seed=DEFAULT_SEED,
        confidence=monitors.confidence,
    )  # fmt: skip
    figures.low, figures.high, figures.decided = low, high, True
    figures.holds = (above is not None and low > above) or (below is not None and high < below)


def _windows(monitor: Baseline, end_s: int) -> tuple[tuple[int, int], tuple[int, int]]:
    start = end_s - monitor.window_s
    return (start, end_s), monitor.baseline_range(start, end_s)


def _by_scope(counts: Iterable[BucketCount]) -> dict[Scope, dict[str, dict[int, int]]]:
    """(tenant, scope) -> counter -> bucket start -> count."""
    out: dict[Scope, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for c in counts:
        buckets = out[(c.tenant, c.scope)][c.name]
        buckets[c.bucket_start_s] = buckets.get(c.bucket_start_s, 0) + c.count
    return out


def _histograms(counts: Iterable[BucketCount]) -> dict[Scope, dict[float, int]]:
    """(tenant, scope) -> score value -> scores holding it."""
    out: dict[Scope, dict[float, int]] = defaultdict(lambda: defaultdict(int))
    for c in counts:
        out[(c.tenant, c.scope)][c.value] += c.count
    return out


def _sum(buckets: dict[int, int], start_s: int, end_s: int) -> int:
    return sum(count for bucket, count in buckets.items() if start_s <= bucket < end_s)


def _totals(counters: dict[str, dict[int, int]], name: str) -> int:
    return sum(counters.get(name, {}).values())
