"""Episodes of the monitors and their alerts (docs/monitors.md, Episodes and How an alert
reads).

Per (tenant, monitor, scope) an episode opens when the monitor's condition holds and
closes when the figures have shown it clear for `resolve_after_s` (a figure flapping
around its threshold stays one episode): one alert of kind `monitor` when it opens
(`firing`) and one when it closes (`resolved`), both naming the episode. A tick whose
window holds too little data to decide (traffic stopped, or a restarted plane still
catching up on the spans it had not committed) changes nothing: an open episode stays
open until data shows the condition cleared, so a gap never resolves and fires it again.
The episode and its alert keys are fixed by the tenant, monitor, scope and the tick it
opened at, so a record written again (a restart that repeats a delivery)
carries the same key. The state survives restarts in the alerts table: the latest record
of each scope is its episode (`Episodes.restore`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pathgrade.detectors.monitor_policy import (
    MONITOR_CODES,
    WEEK_S,
    Baseline,
    DetectorRateMonitor,
    Monitor,
    MonitorsPolicy,
    ObjectiveMonitor,
    ScoreMonitor,
    monitor_kind,
)
from pathgrade.realtime_plane.monitor_figures import Figures
from pathgrade.schemas.alerts import Alert
from pathgrade.schemas.json_text import sorted_text
from pathgrade.schemas.monitors import (
    EPISODE,
    MONITOR,
    MONITOR_KIND,
    OPENED_NS,
    SCOPE,
    STATE,
    EpisodeRecord,
    EpisodeState,
)
from pathgrade.schemas.rollups import INCOMPLETE, TOOL_ERROR

Change = Literal["fire", "resolve"]
EpisodeKey = tuple[str, str, str]  # (tenant, monitor, scope)
NS = 1_000_000_000
FIGURE_DIGITS = 6


@dataclass(frozen=True, slots=True)
class OpenEpisode:
    episode: str
    opened_ns: int


class Episodes:
    """The open episode of each (tenant, monitor, scope), and since when the condition of
    an open one has been clear."""

    def __init__(self, resolve_after_s: int) -> None:
        self.resolve_after_ns = resolve_after_s * NS
        self.open: dict[EpisodeKey, OpenEpisode] = {}
        self.clear_since: dict[EpisodeKey, int] = {}  # open episodes whose condition cleared

    def restore(self, records: Iterable[EpisodeRecord]) -> None:
        """Open the episodes whose latest stored record is a firing one (their condition's
        clear time is not kept: it counts again from the next clear tick)."""
        self.open = {
            (r.tenant, r.monitor, r.scope): OpenEpisode(r.episode, r.opened_ns)
            for r in records
            if r.state == "firing"
        }
        self.clear_since = {}

    def change(self, monitor: Monitor, figures: Figures, now_ns: int) -> Change | None:
        """What the figures at `now_ns` change: an episode to open, one to close (its
        condition clear for `resolve_after_s`), or nothing."""
        key = (figures.tenant, monitor.name, figures.scope)
        is_open = key in self.open
        if figures.holds:
            self.clear_since.pop(key, None)
            return None if is_open else "fire"
        if not (is_open and figures.decided):
            return None
        since = self.clear_since.setdefault(key, now_ns)
        return "resolve" if now_ns - since >= self.resolve_after_ns else None

    def episode(self, monitor: Monitor, figures: Figures, now_ns: int) -> OpenEpisode:
        """The episode an alert of these figures belongs to: the open one, else one opening
        now."""
        key = (figures.tenant, monitor.name, figures.scope)
        opened = self.open.get(key)
        if opened is not None:
            return opened
        text = sorted_text([figures.tenant, monitor.name, figures.scope, now_ns])
        return OpenEpisode(hashlib.sha256(text.encode()).hexdigest()[:32], now_ns)

    def record(
        self, monitor: Monitor, figures: Figures, change: Change, episode: OpenEpisode
    ) -> None:
        """The alert of `change` was stored: the episode is open, or closed."""
        key = (figures.tenant, monitor.name, figures.scope)
        if change == "fire":
            self.open[key] = episode
        else:
            self.open.pop(key, None)
            self.clear_since.pop(key, None)


def monitor_alert(
    monitor: Monitor,
    figures: Figures,
    change: Change,
    episode: OpenEpisode,
    monitors: MonitorsPolicy,
    policy_name: str,
    now_ns: int,
    examples: list[tuple[str, str]],
) -> Alert:
    """The alert of an episode opening (`fire`) or closing (`resolve`)."""
    state: EpisodeState = "firing" if change == "fire" else "resolved"
    kind = monitor_kind(monitor)
    start_s, end_s = figures.window
    trace_id, span_id = examples[0] if examples else ("", "")
    where = dict(scope_fields(monitor, figures.scope))
    details = {
        MONITOR: monitor.name, MONITOR_KIND: kind, SCOPE: figures.scope, STATE: state,
        EPISODE: episode.episode, OPENED_NS: episode.opened_ns,
        "window": {"start_ns": start_s * NS, "end_ns": end_s * NS},
        "baseline_window": None if figures.baseline_window is None else {
            "start_ns": figures.baseline_window[0] * NS,
            "end_ns": figures.baseline_window[1] * NS,
        },
        "figure": figures.figure, "threshold": figures.threshold,
        "interval": None if figures.low is None else [figures.low, figures.high],
        "confidence": monitors.confidence, "current": figures.current,
        "baseline": figures.baseline, "items": figures.items,
        "baseline_items": figures.baseline_items,
        "examples": [{"trace_id": t, "span_id": s} for t, s in examples],
        "traces": trace_filter(monitor, figures.scope), **figures.details,
    }  # fmt: skip
    details = rounded(details)
    key_text = sorted_text([episode.episode, state])
    return Alert(
        alert_key=hashlib.sha256(key_text.encode()).hexdigest()[:32],
        code=MONITOR_CODES[kind], name=monitor.name, severity=figures.severity,
        kind="monitor", reason=reason(monitor, figures, state, monitors.confidence),
        trace_id=trace_id, span_id=span_id, tenant=figures.tenant,
        service=where.get("service", ""), agent=where.get("agent", ""), conversation_id="",
        risk_tier="", policy=policy_name, details=details, trace_start_ns=start_s * NS,
        trace_end_ns=end_s * NS, detected_at_ns=now_ns,
    )  # fmt: skip


def rounded(value: Any) -> Any:
    """`value` with every float in it to FIGURE_DIGITS significant digits (0.01, not
    0.010000000000000009)."""
    if isinstance(value, float):
        return float(f"{value:.{FIGURE_DIGITS}g}")
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return value


def scope_fields(monitor: Monitor, scope: str) -> list[tuple[str, str]]:
    """The service and agent a monitor's scope is about: its filters, or the scope's value
    when it splits by service or agent."""
    fields = [("service", monitor.service or ""), ("agent", monitor.agent or "")]
    dimension, _, value = scope.partition("=")
    return [(name, value if name == dimension else kept) for name, kept in fields]


def trace_filter(monitor: Monitor, scope: str) -> dict[str, str]:
    """The browser UI's trace-list filters that show the turns behind a figure (with the
    window's `from` and `to`): the service and agent it keeps to, and what its bad turns
    did. A slice's value is not a filter of the list."""
    found = {name: value for name, value in scope_fields(monitor, scope) if value}
    if isinstance(monitor, ObjectiveMonitor):
        budget = monitor.budget or 0.0
        found.update({
            "complete": {}, "no_tool_error": {"error": "yes"},
            "no_finding": {"code": monitor.detector or ""},
            "latency_under": {"min_ms": f"{budget * 1000:g}"},
            "cost_under": {"min_cost": f"{budget:g}"},
        }[monitor.good])  # fmt: skip
    elif isinstance(monitor, DetectorRateMonitor):
        found["code"] = monitor.detector
    else:
        found["score"] = "yes"
    return found


def reason(monitor: Monitor, figures: Figures, state: EpisodeState, confidence: float) -> str:
    """The alert's sentence (docs/monitors.md, How an alert reads)."""
    head = monitor.name + (f" ({figures.scope})" if figures.scope else "")
    prefix = f"{head}: " + ("resolved: " if state == "resolved" else "")
    if isinstance(monitor, ObjectiveMonitor):
        return prefix + _objective_reason(monitor, figures, state)
    return prefix + _baseline_reason(monitor, figures, state, confidence)


def _objective_reason(monitor: ObjectiveMonitor, figures: Figures, state: EpisodeState) -> str:
    pair = next((p for p in figures.details["pairs"] if p["holds"]), figures.details["pairs"][0])
    short, long = pair["short"], pair["long"]
    short_w, long_w = duration(pair["short_s"]), duration(pair["long_s"])
    share = short["bad"] / short["turns"] if short["turns"] else 0.0
    long_share = long["bad"] / long["turns"] if long["turns"] else 0.0
    verdict = "above" if state == "firing" else "not above"
    return (
        f"{share:.1%} of {short['turns']:,} turns {bad_turns(monitor)} over the last "
        f"{short_w} ({long_w}: {long_share:.1%}): the {monitor.objective:.4g} objective's error "
        f"budget burns {short['burn']:.1f}x ({long_w}: {long['burn']:.1f}x), {verdict} "
        f"{pair['burn_rate']:g}x"
    )


def _baseline_reason(
    monitor: DetectorRateMonitor | ScoreMonitor,
    figures: Figures,
    state: EpisodeState,
    confidence: float,
) -> str:
    window, before = duration(monitor.window_s), baseline_words(monitor)
    low, high = figures.low or 0.0, figures.high or 0.0
    if isinstance(monitor, DetectorRateMonitor):
        now, base = figures.current or 0.0, figures.baseline or 0.0
        verdict = "above" if state == "firing" else "no longer above"
        return (
            f"{now:.1%} of {figures.items:,} turns had {monitor.detector} findings over the "
            f"last {window}, against {base:.1%} of {figures.baseline_items:,} {before}: "
            f"{(now - base) * 100:+.1f} points ({confidence:.0%} interval {low * 100:+.1f} to "
            f"{high * 100:+.1f}), {verdict} the tolerance of {monitor.tolerance * 100:g} points"
        )
    metric = figures.details["metric"]
    now, base = figures.current or 0.0, figures.baseline or 0.0
    verdict = "below" if state == "firing" else "no longer below"
    return (
        f"mean {metric} {now:.3f} over {figures.items:,} scores in the last {window}, "
        f"against {base:.3f} over {figures.baseline_items:,} {before}: {now - base:+.3f} "
        f"({confidence:.0%} interval {low:+.3f} to {high:+.3f}), {verdict} "
        f"{-monitor.max_drop:g}"
    )


def bad_turns(monitor: ObjectiveMonitor) -> str:
    """What the objective's bad turns did, as words after "turns"."""
    counter = monitor.bad_counter
    if counter == INCOMPLETE:
        return "were incomplete"
    if counter == TOOL_ERROR:
        return "had a failed tool call"
    if monitor.good == "no_finding":
        return f"had {monitor.detector} findings"
    if monitor.good == "latency_under":
        return f"took longer than {monitor.budget:g} s"
    return f"cost more than {monitor.budget:g} USD"


def baseline_words(monitor: Baseline) -> str:
    """Where the baseline is, in words."""
    if monitor.baseline_from is not None and monitor.baseline_to is not None:
        return f"from {monitor.baseline_from.isoformat()} to {monitor.baseline_to.isoformat()}"
    if monitor.baseline_offset_s == WEEK_S:
        return "in the same hours a week earlier"
    return f"in the same window {duration(monitor.baseline_offset_s)} earlier"


def duration(seconds: int) -> str:
    """`45s`, `5m`, `90m`, `1h`, `36h`, `7d`: the largest unit that divides it."""
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
