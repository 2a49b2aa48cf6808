"""The trace list: a time range of traces with filters, a free-text search over span names,
two sort orders, keyset paging on the store, and counts per filter value.

A trace is listed by its root span (table `trace_roots`, sorted by tenant and time, so a
page reads only its end of the range); the store room's `trace_list` reads select the
traces (`TraceSelection`) and what the page shows of each. Every read is scoped to the
viewer's tenant. The URL holds the whole query.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pathgrade.batch_plane.store import trace_list as stored
from pathgrade.batch_plane.store.trace_list import RowKey, TraceSelection
from pathgrade.detectors.prices import PriceTable, cost_usd
from pathgrade.web import params as p
from pathgrade.web.store_reads import ReadStore
from pathgrade.web.viewers import Viewer

PAGE_SIZE = 50
DEFAULT_FROM = "24h"
SORTS = tuple(stored.SORT_COLUMNS)
ORDERS = ("desc", "asc")
SEVERITIES = ("low", "medium", "high", "critical")
FACET_VALUES = 12  # most frequent values shown per facet
FACET_TRACES = 1_000  # a filtered list's counts are over its newest this many traces
_FILTER_NAMES = (
    "service", "agent", "tool", "model", "conversation", "code", "severity", "alert", "score",
    "error", "min_ms", "max_ms", "min_cost", "max_cost", "q", "run",
)  # fmt: skip


@dataclass(frozen=True)
class Cursor(RowKey):
    """Where the next page starts (the last row's sort value, trace id and tenant), as the
    page's links write it."""

    def text(self) -> str:
        return f"{self.value}~{self.trace_id}~{self.tenant}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        value, sep, rest = text.partition("~")
        trace_id, sep2, tenant = rest.partition("~")
        if not (sep and sep2 and value.isdigit() and trace_id):
            raise p.BadParameter("after", "not a cursor this page wrote")
        return cls(int(value), trace_id, tenant)


@dataclass(frozen=True)
class TraceQuery(TraceSelection):
    """One trace-list query as the URL gives it."""

    raw: Mapping[str, str] = field(default_factory=dict)  # the URL's values, for links

    @classmethod
    def from_params(cls, values: Mapping[str, str], now_ns: int) -> TraceQuery:
        """The query of a URL's parameters; BadParameter names a bad one."""
        severity = p.text(values, "severity")
        if severity and severity not in SEVERITIES:
            raise p.BadParameter("severity", f"expected one of {', '.join(SEVERITIES)}")
        after = p.text(values, "after")
        return cls(
            start_ns=p.instant_ns(values, "from", DEFAULT_FROM, now_ns),
            end_ns=p.instant_ns(values, "to", "now", now_ns) + (1 if "to" not in values else 0),
            raw={k: v for k, v in values.items() if v},
            service=p.text(values, "service"),
            run=p.text(values, "run"),
            agent=p.text(values, "agent"),
            tool=p.text(values, "tool"),
            model=p.text(values, "model"),
            conversation=p.text(values, "conversation"),
            code=p.text(values, "code"),
            severity=severity,
            has_alert=p.yes_no(values, "alert"),
            has_score=p.yes_no(values, "score"),
            error=p.yes_no(values, "error"),
            min_ms=p.number(values, "min_ms"),
            max_ms=p.number(values, "max_ms"),
            min_cost=p.number(values, "min_cost"),
            max_cost=p.number(values, "max_cost"),
            text=p.text(values, "q"),
            sort=p.choice(values, "sort", SORTS),
            descending=p.choice(values, "order", ORDERS) == "desc",
            after=Cursor.parse(after) if after else None,
        )

    @property
    def filtered(self) -> bool:
        """Any filter besides the time range."""
        return any(self.raw.get(name) for name in _FILTER_NAMES)

    def link(self, **changes: str | None) -> str:
        """This query's URL with `changes` (None removes a value); a new page starts at
        the first row unless `after` is among the changes."""
        values: dict[str, str | None] = {**self.raw, "after": None}
        values.update(changes)
        return "/traces" + p.query_string(values)


@dataclass
class TraceRow:
    """One listed trace with what the page shows about it."""

    tenant: str
    trace_id: str
    start_ns: int
    duration_ns: int
    name: str
    service: str
    agent: str
    conversation: str
    status: str
    run_id: str
    item_id: str
    spans: int = 0
    errors: int = 0
    tools: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float | None = None
    alerts: int = 0
    codes: list[str] = field(default_factory=list)
    severity: str = ""
    scores: int = 0


@dataclass
class TracePage:
    """A page of the list, the cursor of the next one, and the facet counts."""

    rows: list[TraceRow]
    next_cursor: Cursor | None
    facets: dict[str, list[tuple[str, int]]]


def list_traces(
    store: ReadStore, viewer: Viewer, query: TraceQuery, prices: PriceTable,
    page_size: int = PAGE_SIZE,
) -> TracePage:  # fmt: skip
    """One page of the list (with the cursor of the next) and the facet counts. A filtered
    list's first page newest first is the head of the newest FACET_TRACES matching traces
    its counts are over: the filters are read once for both."""
    limit = int(page_size) + 1
    newest: list[list[Any]] | None = None
    if query.filtered and query.after is None and query.sort == "start" and query.descending:
        rows = stored.roots(store, viewer, query, prices.models, max(FACET_TRACES, limit))
        newest = rows[:FACET_TRACES]
        rows = rows[:limit]
    else:
        rows = stored.roots(store, viewer, query, prices.models, limit)
    unique = {(row[0], row[1]): row for row in rows}  # a root stored twice, not merged yet
    traces = [TraceRow(*row) for row in list(unique.values())[:page_size]]
    next_cursor = None
    if len(rows) > page_size and traces:
        last = traces[-1]
        value = last.start_ns if query.sort == "start" else last.duration_ns
        next_cursor = Cursor(value, last.trace_id, last.tenant)
    # one read of `alerts` for the rows and the counts: the newest traces' hold the page's
    alerts = None
    if newest is not None:
        alerts = stored.alerts_of(store, viewer, _keys(newest))
    elif not query.filtered:  # the page's traces', and the range's per code and severity
        keys = [(row.tenant, row.trace_id) for row in traces]
        alerts = stored.alerts_of(store, viewer, keys, query.start_ns, query.end_ns)
    _add_details(store, viewer, traces, prices, alerts)
    return TracePage(traces, next_cursor, facets(store, viewer, query, prices, newest, alerts))


def _keys(rows: list[list[Any]]) -> list[stored.TraceKey]:
    """The (tenant, trace id) of each root row, once (a root stored twice, not merged)."""
    return list(dict.fromkeys((row[0], row[1]) for row in rows))


def _add_details(
    store: ReadStore, viewer: Viewer, traces: list[TraceRow], prices: PriceTable,
    alerts: list[stored.TraceAlerts] | None = None,
) -> None:  # fmt: skip
    """Span counts, errors, tools, models, tokens, cost, alerts (of `alerts` when the
    caller read them, else read here) and scores of each row.

    The page's spans are read by the primary key's prefix without FINAL (one row per span
    by LIMIT BY) and summed here, cost with `detectors.prices.cost_usd` as on the trace
    page: cheaper than ClickHouse planning the aggregates and the price table for a few
    hundred rows."""
    if not traces:
        return
    keys = [(t.tenant, t.trace_id) for t in traces]
    by_key = {(t.tenant, t.trace_id): t for t in traces}
    tools: dict[tuple[str, str], set[str]] = defaultdict(set)
    models: dict[tuple[str, str], set[str]] = defaultdict(set)
    unpriced: set[tuple[str, str]] = set()  # a model the price table lacks: no cost
    for span in stored.spans_of(store, viewer, keys):
        key = (span.tenant, span.trace_id)
        row = by_key.get(key)
        if row is None:
            continue
        row.spans += 1
        row.errors += bool(span.failed)
        if span.tool:
            tools[key].add(span.tool)
        if span.model:
            models[key].add(span.model)
        tokens_in, tokens_out = span.input_tokens or 0, span.output_tokens or 0
        row.tokens += span.total_tokens if span.total_tokens is not None else tokens_in + tokens_out
        if tokens_in or tokens_out:
            cost = cost_usd(span.model, span.provider, tokens_in, tokens_out, prices)
            if cost is None:
                unpriced.add(key)
            row.cost_usd = (row.cost_usd or 0.0) + (cost or 0.0)
    for key, row in by_key.items():
        row.tools, row.models = sorted(tools[key]), sorted(models[key])
        if key in unpriced:
            row.cost_usd = None
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    codes: dict[tuple[str, str], set[str]] = defaultdict(set)
    severities: dict[tuple[str, str], set[str]] = defaultdict(set)  # of violations
    for alert in stored.alerts_of(store, viewer, keys) if alerts is None else alerts:
        key = (alert.tenant, alert.trace_id)
        if key in by_key:
            codes[key].add(alert.code)
            if alert.kind == "violation":
                by_key[key].alerts += alert.alerts
                severities[key].add(alert.severity)
    for key, row in by_key.items():
        row.codes = sorted(codes[key])
        row.severity = max(sorted(severities[key]), key=lambda s: rank.get(s, -1), default="")
    for tenant, trace_id, scores in stored.scores_of(store, viewer, keys):
        if (tenant, trace_id) in by_key:
            by_key[(tenant, trace_id)].scores = scores


def facets(
    store: ReadStore, viewer: Viewer, query: TraceQuery, prices: PriceTable,
    newest: list[list[Any]] | None = None, alerts: list[stored.TraceAlerts] | None = None,
) -> dict[str, list[tuple[str, int]]]:  # fmt: skip
    """The most frequent values of each filter among the traces the filters select, with
    counts: alerts per detector code and severity; without filters traces per service and
    spans per agent, tool and model; with filters traces per service, agent, tool and model.

    Without filters the counts come from `span_counts` (per minute: the range is rounded
    out to whole minutes); with filters, over the newest FACET_TRACES matching traces
    (their roots `newest` and their `alerts` when the caller read them, else read here):
    services from the roots, agents, tools and models from `trace_facets` over the time
    from the oldest of those roots (`stored.trace_facet_counts`), alerts by key. `alerts`
    without filters: the alerts of the range's traces (`stored.alerts_of` with a range)."""
    counted: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    if query.filtered:
        if newest is None:
            newest = stored.newest(store, viewer, query, prices.models, FACET_TRACES)
        roots = {(row[0], row[1]): row for row in newest}  # a root stored twice
        if not roots:
            return {}
        for row in roots.values():
            counted["service"][row[5]] += 1
        since = min(row[2] for row in roots.values())
        until = query.end_ns + stored.SPAN_SLACK_NS
        for facet, value, traces in stored.trace_facet_counts(
            store, viewer, list(roots), since, until
        ):
            counted[facet][value] += traces
        if alerts is None:
            alerts = stored.alerts_of(store, viewer, list(roots))
        chosen = [a for a in alerts if (a.tenant, a.trace_id) in roots]
    else:
        for service, agent, tool, model, spans, root_spans in stored.minute_facets(
            store, viewer, query.start_ns, query.end_ns
        ):
            if root_spans:
                counted["service"][service] += root_spans
            for facet, value in (("agent", agent), ("tool", tool), ("model", model)):
                if value:
                    counted[facet][value] += spans
        if alerts is None:
            alerts = stored.alerts_of(store, viewer, [], query.start_ns, query.end_ns)
        chosen = [a for a in alerts if a.in_range]
    for alert in chosen:
        counted["code"][alert.code] += alert.alerts
        counted["severity"][alert.severity] += alert.alerts
    return {
        facet: sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))[:FACET_VALUES]
        for facet, values in counted.items()
    }
