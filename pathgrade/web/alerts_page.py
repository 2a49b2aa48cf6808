"""The alerts page: stored alerts over a time range with filters like the trace list's, the
alerts per interval by detector code as a chart, the policy's monitors (each scope's figure
at every evaluation of the range against its threshold, as a chart whose points lead to the
traces behind them), the top services and tools, and the coverage of the checks that could
not decide (`cannot_decide` findings: what was missing, on how many of the range's
traces)."""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from pathgrade.batch_plane.store import alerts as stored_alerts
from pathgrade.batch_plane.store import traces as stored_traces
from pathgrade.batch_plane.store.alerts import AlertFilters
from pathgrade.batch_plane.store.monitors import MonitorQueries
from pathgrade.detectors.monitor_policy import MONITOR_CODES
from pathgrade.schemas.monitors import MonitorTick
from pathgrade.web import params as p
from pathgrade.web.rendering import Ui
from pathgrade.web.store_reads import ReadStore
from pathgrade.web.svg import Point, line_chart, stacked_bars
from pathgrade.web.trace_list import SEVERITIES
from pathgrade.web.viewers import Viewer

ROWS_SHOWN = 200
BUCKETS = 40
KINDS = ("", "violation", "cannot_decide", "monitor")
TOP = 10
FACET_VALUES = 15  # values listed per filter
CHART_POINTS = 240  # evaluations drawn per monitor chart at most (firing ones always)


@dataclass(frozen=True)
class AlertQuery:
    start_ns: int
    end_ns: int
    raw: dict[str, str]
    code: str = ""
    severity: str = ""
    service: str = ""
    agent: str = ""
    kind: str = ""
    before_ns: int | None = None  # keyset: rows detected before this

    @classmethod
    def from_params(cls, values: dict[str, str], now_ns: int) -> AlertQuery:
        severity = p.text(values, "severity")
        if severity and severity not in SEVERITIES:
            raise p.BadParameter("severity", f"expected one of {', '.join(SEVERITIES)}")
        before = p.text(values, "before")
        if before and not before.isdigit():
            raise p.BadParameter("before", "not a position this page wrote")
        return cls(
            start_ns=p.instant_ns(values, "from", "24h", now_ns),
            end_ns=p.instant_ns(values, "to", "now", now_ns) + (1 if "to" not in values else 0),
            raw={k: v for k, v in values.items() if v and k != "before"},
            code=p.text(values, "code"),
            severity=severity,
            service=p.text(values, "service"),
            agent=p.text(values, "agent"),
            kind=p.choice(values, "kind", KINDS),
            before_ns=int(before) if before else None,
        )

    def link(self, **changes: str | None) -> str:
        return "/alerts" + p.query_string({**self.raw, **changes})

    @property
    def filters(self) -> AlertFilters:
        """The stored alerts this page shows (before paging)."""
        return AlertFilters(
            self.start_ns, self.end_ns, self.code, self.severity, self.service, self.agent,
            self.kind,
        )  # fmt: skip


@dataclass
class AlertsPage:
    rows: list[dict[str, Any]]
    total: int
    next_before: int | None
    chart: str
    top_services: list[tuple[str, int]]
    top_tools: list[tuple[str, int]]
    coverage: list[dict[str, Any]]
    traces_in_range: int
    facets: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    monitors: list[MonitorPanel] = field(default_factory=list)


@dataclass
class MonitorPanel:
    """One monitor's scope of one tenant over the range: its latest figures and its chart."""

    latest: MonitorTick
    chart: str
    traces_link: str  # the traces behind the latest figure
    alerts_link: str  # this monitor's alerts in the range
    evaluations: int
    anchor: str = ""  # the page's anchor of the monitor, on its first panel


def monitor_panels(store: ReadStore, query: AlertQuery) -> list[MonitorPanel]:
    """A panel per (monitor, tenant, scope) evaluated in the range, unless the filters keep
    to detectors' alerts (a code, or a kind other than monitor) or to another service."""
    if (query.kind and query.kind != "monitor") or (
        query.code and query.code not in MONITOR_CODES.values()
    ):
        return []
    series: dict[tuple[str, str, str], list[MonitorTick]] = defaultdict(list)
    for tick in MonitorQueries(store).ticks(query.start_ns, query.end_ns):
        series[(tick.monitor, tick.tenant, tick.scope)].append(tick)
    panels = []
    for ticks in series.values():
        latest = ticks[-1]
        traces = latest.details.get("traces") or {}
        if query.service and traces.get("service", query.service) != query.service:
            continue
        step = max(latest.tick_ns - ticks[0].tick_ns, 1)
        points = [
            Point(_label(t.tick_ns, step), t.figure, t.low, t.high, t.state == "firing",
                  traces_link(t))
            for t in _thinned(ticks)
        ]  # fmt: skip
        name = f"{latest.monitor} {latest.scope}".strip()
        panels.append(
            MonitorPanel(
                latest,
                line_chart(points, latest.threshold, name),
                traces_link(latest),
                query.link(kind="monitor", code=MONITOR_CODES[latest.kind]),
                len(ticks),
            )
        )
    panels.sort(key=lambda panel: (panel.latest.monitor, panel.latest.tenant, panel.latest.scope))
    for panel in panels:
        if not any(other.anchor == f"monitor-{panel.latest.monitor}" for other in panels):
            panel.anchor = f"monitor-{panel.latest.monitor}"
    return panels


def traces_link(tick: MonitorTick) -> str:
    """The trace list of the tick's window, filtered to the turns behind its figure."""
    filters = {
        **(tick.details.get("traces") or {}),
        "from": _iso(tick.window_start_ns), "to": _iso(tick.window_end_ns),
    }  # fmt: skip
    return "/traces" + p.query_string(filters)


def _thinned(ticks: list[MonitorTick]) -> list[MonitorTick]:
    """At most CHART_POINTS of the ticks, evenly spread, every firing one kept."""
    if len(ticks) <= CHART_POINTS:
        return ticks
    every = -(-len(ticks) // CHART_POINTS)
    return [t for i, t in enumerate(ticks) if i % every == 0 or t.state == "firing"]


def bucket_ns(start_ns: int, end_ns: int, buckets: int = BUCKETS) -> int:
    """An interval length (a round number of seconds, minutes or hours) giving about
    `buckets` bars over the range."""
    span_s = max((end_ns - start_ns) / 1e9, 1)
    for seconds in (10, 30, 60, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400):
        if span_s / seconds <= buckets:
            return seconds * 10**9
    return 7 * 86400 * 10**9


def _label(ns: int, step_ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC)
    return moment.strftime("%m-%d %H:%M" if step_ns >= 3600 * 10**9 else "%H:%M:%S")


def chart(
    query: AlertQuery, per_interval: list[tuple[int, str, int]], first: int, step: int
) -> str:
    """Alerts per interval (of `step` ns from `first`) by code, as SVG; each segment links
    to the interval's alerts."""
    count = int((query.end_ns - first) // step) + 1
    series: dict[str, list[int]] = defaultdict(lambda: [0] * count)
    for bucket, code, n in per_interval:
        if 0 <= bucket < count:
            series[code][bucket] += n
    labels = [_label(first + i * step, step) for i in range(count)]

    def link(code: str, index: int) -> str:
        start = first + index * step
        return query.link(code=code, **{"from": _iso(start), "to": _iso(start + step)})

    return stacked_bars(labels, dict(sorted(series.items())), link)


def _iso(ns: int) -> str:
    return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC).isoformat()


def load_alerts(store: ReadStore, viewer: Viewer, query: AlertQuery) -> AlertsPage:
    filters = query.filters
    rows = stored_alerts.page(store, viewer, filters, query.before_ns, ROWS_SHOWN + 1)
    next_before = rows[ROWS_SHOWN - 1]["DetectedAtNs"] if len(rows) > ROWS_SHOWN else None
    rows = rows[:ROWS_SHOWN]
    started = stored_traces.started_in_range(store, viewer, query.start_ns, query.end_ns)
    step = bucket_ns(query.start_ns, query.end_ns)
    first = query.start_ns - query.start_ns % step
    tally = stored_alerts.tallies(store, viewer, filters, first, step)
    return AlertsPage(
        rows=rows,
        total=tally.total,
        next_before=next_before,
        chart=chart(query, tally.per_interval, first, step),
        top_services=tally.top("service", TOP),
        top_tools=tally.top(stored_alerts.TOOL, TOP),
        coverage=coverage(store, viewer, query, started),
        traces_in_range=started,
        facets={
            name: tally.top(name, FACET_VALUES) for name in ("code", "severity", "kind", "agent")
        },
        monitors=monitor_panels(store, query),
    )


def coverage(
    store: ReadStore, viewer: Viewer, query: AlertQuery, traces: int
) -> list[dict[str, Any]]:
    """Per detector code and missing input: the traces of the range it could not decide on
    (the share is of the traces whose root started in the range)."""
    return [
        {"code": u.code, "name": u.name, "missing": u.missing, "traces": u.traces,
         "example": u.example, "share": u.traces / traces if traces else None}
        for u in stored_alerts.undecided(store, viewer, query.start_ns, query.end_ns)
    ]  # fmt: skip


def alerts(ui: Ui, request: Request) -> tuple[str, dict[str, Any]]:
    query = AlertQuery.from_params(dict(request.query_params), ui.settings.clock_ns())
    return "alerts.html", {
        "query": query,
        "page": load_alerts(ui.store, request.state.viewer, query),
    }


PAGES = {"/alerts": alerts}
