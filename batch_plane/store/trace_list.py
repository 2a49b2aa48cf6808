"""Typed reads of the trace list: a page of trace roots (table `trace_roots`) chosen by a
time range and filters, in one of two sort orders with keyset paging, what the page shows
of each listed trace (its spans, alerts and scores) and the counts per filter value.

Filters on what a trace's other spans did (agent, tool, model, conversation, error, span
name, cost) and on its alerts and scores select `(Tenant, TraceId)` pairs with a sub-query
each: agent, tool, model and error on `trace_facets` (migration 0018: the traces per value,
sorted by value and time), the others on `spans`. Spans of a trace are looked for from the
range's start to a day past its end (`SPAN_SLACK_NS`): a trace's spans start after its
root. Every read keeps to the viewer's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.batch_plane.store.traces import span_times
from pathgrade.schemas.store import ReadableStore

SPAN_SLACK_NS = 86_400 * 10**9
SORT_COLUMNS = {"start": "Timestamp", "duration": "Duration"}
"""A sort order's name -> the column of `trace_roots` it sorts by."""
MODEL = "if(GenAIResponseModel != '', GenAIResponseModel, GenAIRequestModel)"
TraceKey = tuple[str, str]
"""(tenant, trace id)."""


class ModelPrice(Protocol):
    """A model's list price (`detectors.prices.ModelPrice`), as the cost filter reads it."""

    model: str
    input_usd_per_mtok: float
    output_usd_per_mtok: float


Prices = Sequence[ModelPrice]
"""A price table's models (`detectors.prices.PriceTable.models`)."""


@dataclass(frozen=True)
class RowKey:
    """Where a page of the list ends: its last row's sort value, trace id and tenant."""

    value: int
    trace_id: str
    tenant: str


@dataclass(frozen=True)
class TraceSelection:
    """The traces whose root started in [start_ns, end_ns) and that pass every filter set
    ("" or None: any), in the order `sort` (a name of `SORT_COLUMNS`) and `descending`
    say, after the row `after` (None: from the first)."""

    start_ns: int
    end_ns: int
    service: str = ""
    run: str = ""
    agent: str = ""
    tool: str = ""
    model: str = ""
    conversation: str = ""
    code: str = ""
    severity: str = ""
    has_alert: bool | None = None
    has_score: bool | None = None
    error: bool | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    min_cost: float | None = None
    max_cost: float | None = None
    text: str = ""
    sort: str = "start"
    descending: bool = True
    after: RowKey | None = None


class _Sql:
    """A WHERE clause under construction with its parameters (named uniquely)."""

    def __init__(self, viewer: Viewer) -> None:
        self.conditions: list[str] = [viewer.where("Tenant")]
        self.parameters: dict[str, Any] = dict(viewer.parameters)

    def add(self, condition: str, **values: Any) -> None:
        self.conditions.append(condition)
        self.parameters.update(values)

    @property
    def where(self) -> str:
        return " AND ".join(self.conditions)


def cost_expression(prices: Prices) -> str:
    """SQL: a span's list-price cost in USD from its tokens and model (NaN for a model the
    table lacks; 0 for a span without tokens), matching a model by exact name, then by
    longest dated prefix, as `PriceTable.price_of` does without a provider."""
    conditions, inputs, outputs = [], [], []
    for price in sorted(prices, key=lambda m: -len(m.model)):
        name = price.model.replace("\\", "\\\\").replace("'", "\\'")
        conditions.append(f"({MODEL} = '{name}' OR startsWith({MODEL}, '{name}-'))")
        inputs.append(repr(price.input_usd_per_mtok))
        outputs.append(repr(price.output_usd_per_mtok))

    def price_of(values: list[str]) -> str:
        pairs = [f"{c}, {v}" for c, v in zip(conditions, values, strict=True)]
        return f"multiIf({', '.join(pairs)}, nan)" if pairs else "nan"

    tokens_in, tokens_out = "ifNull(GenAIInputTokens, 0)", "ifNull(GenAIOutputTokens, 0)"
    return (
        f"if({tokens_in} + {tokens_out} = 0, 0, "
        f"({tokens_in} * {price_of(inputs)} + {tokens_out} * {price_of(outputs)}) / 1e6)"
    )


def _facets(query: TraceSelection) -> list[tuple[str, str]]:
    """(facet, value) of `trace_facets` for each filter on an agent, tool or model of a
    trace's spans, each selecting the traces with such a span (read from that table:
    only the rows of the value in the range, not every span of it)."""
    chosen = (("agent", query.agent), ("tool", query.tool), ("model", query.model))
    return [(facet, value) for facet, value in chosen if value]


def _span_conditions(query: TraceSelection) -> list[tuple[str, dict[str, Any]]]:
    """Conditions on single spans, each selecting the traces with such a span."""
    found: list[tuple[str, dict[str, Any]]] = []
    if query.conversation:
        found.append(("GenAIConversationId = {conv:String}", {"conv": query.conversation}))
    if query.text:
        found.append(("positionCaseInsensitiveUTF8(SpanName, {q:String}) > 0", {"q": query.text}))
    return found


def _root_filters(query: TraceSelection, viewer: Viewer, prices: Prices) -> _Sql:
    """Conditions on `trace_roots` for every filter of `query` (no paging)."""
    sql = _Sql(viewer)
    sql.add(
        "Timestamp >= fromUnixTimestamp64Nano({start:Int64}) "
        "AND Timestamp < fromUnixTimestamp64Nano({end:Int64})",
        start=query.start_ns, end=query.end_ns,
    )  # fmt: skip
    spans_in_range = (
        f"{viewer.where('Tenant')} AND Timestamp >= fromUnixTimestamp64Nano({{start:Int64}}) "
        "AND Timestamp < fromUnixTimestamp64Nano({span_end:Int64})"
    )
    sql.parameters["span_end"] = query.end_ns + SPAN_SLACK_NS
    if query.service:
        sql.add("ServiceName = {service:String}", service=query.service)
    if query.run:
        sql.add("EvalRunId = {run:String}", run=query.run)
    for condition, values in _span_conditions(query):
        sql.add(
            f"(Tenant, TraceId) IN (SELECT Tenant, TraceId FROM spans "
            f"WHERE {spans_in_range} AND {condition})",
            **values,
        )
    for facet, value in _facets(query):
        sql.add(
            f"(Tenant, TraceId) IN (SELECT Tenant, TraceId FROM trace_facets WHERE "
            f"{spans_in_range} AND Facet = '{facet}' AND Value = {{{facet}:String}})",
            **{facet: value},
        )
    if query.error is not None:
        negate = "" if query.error else "NOT "
        sql.add(
            f"(Tenant, TraceId) {negate}IN (SELECT Tenant, TraceId FROM trace_facets WHERE "
            f"{spans_in_range} AND Facet = 'error' AND Value = 'yes')"
        )
    if query.min_ms is not None:
        sql.add("Duration >= {min_ns:UInt64}", min_ns=int(query.min_ms * 1e6))
    if query.max_ms is not None:
        sql.add("Duration <= {max_ns:UInt64}", max_ns=int(query.max_ms * 1e6))
    if query.min_cost is not None or query.max_cost is not None:
        total = f"sum({cost_expression(prices)})"
        having = []
        if query.min_cost is not None:
            having.append(f"{total} >= {{min_cost:Float64}}")
            sql.parameters["min_cost"] = query.min_cost
        if query.max_cost is not None:
            having.append(f"{total} <= {{max_cost:Float64}}")
            sql.parameters["max_cost"] = query.max_cost
        sql.add(
            f"(Tenant, TraceId) IN (SELECT Tenant, TraceId FROM spans WHERE {spans_in_range} "
            f"GROUP BY Tenant, TraceId HAVING {' AND '.join(having)})"
        )
    alert_conditions = []
    if query.code:
        alert_conditions.append("Code = {code:String}")
        sql.parameters["code"] = query.code
    if query.severity:
        alert_conditions.append("Severity = {severity:String}")
        sql.parameters["severity"] = query.severity
    if alert_conditions or query.has_alert:  # GLOBAL: an alert may be on another shard
        conditions = alert_conditions or ["Kind = 'violation'"]
        sql.add(
            f"(Tenant, TraceId) GLOBAL IN (SELECT Tenant, TraceId FROM alerts FINAL "
            f"WHERE {viewer.where('Tenant')} AND {' AND '.join(conditions)})"
        )
    if query.has_alert is False:
        sql.add(
            "(Tenant, TraceId) GLOBAL NOT IN (SELECT Tenant, TraceId FROM alerts FINAL "
            f"WHERE {viewer.where('Tenant')} AND Kind = 'violation')"
        )
    if query.has_score is not None:
        negate = "" if query.has_score else "NOT "
        sql.add(
            f"(Tenant, TraceId) {negate}IN (SELECT Tenant, TraceId FROM scores "
            f"WHERE {viewer.where('Tenant')})"
        )
    return sql


def roots(
    store: ReadableStore, viewer: Viewer, query: TraceSelection, prices: Prices, limit: int
) -> list[list[Any]]:
    """Up to `limit` roots of the selected traces after `query.after`, in its order:
    Tenant, TraceId, start (Unix ns), Duration, SpanName, ServiceName, GenAIAgentName,
    GenAIConversationId, StatusCode, EvalRunId, EvalDatasetItemId."""
    sql = _root_filters(query, viewer, prices)
    column = SORT_COLUMNS[query.sort]
    direction = "DESC" if query.descending else "ASC"
    if query.after is not None:
        compare = "<" if query.descending else ">"
        value = (
            "fromUnixTimestamp64Nano({after_value:Int64})"
            if query.sort == "start"
            else "{after_value:UInt64}"
        )
        sql.add(
            f"{column} {compare}= {value} AND ({column}, TraceId, Tenant) {compare} "
            f"({value}, {{after_trace:String}}, {{after_tenant:String}})",
            after_value=query.after.value, after_trace=query.after.trace_id,
            after_tenant=query.after.tenant,
        )  # fmt: skip
    return store.query(
        "SELECT Tenant, TraceId, toUnixTimestamp64Nano(Timestamp), Duration, SpanName, "
        "ServiceName, GenAIAgentName, GenAIConversationId, StatusCode, EvalRunId, "
        f"EvalDatasetItemId FROM trace_roots WHERE {sql.where} "
        f"ORDER BY {column} {direction}, TraceId {direction}, Tenant {direction} "
        f"LIMIT {int(limit)}",
        sql.parameters,
    ).rows


def _span_keys(
    store: ReadableStore, viewer: Viewer, keys: Sequence[TraceKey]
) -> tuple[str, dict[str, Any]]:
    """As `_keys`, on `spans`: only the days the traces' spans are in (`span_times`)."""
    condition, values = _keys(viewer, keys)
    days, bounds = span_times(store, [trace for _, trace in keys], [t for t, _ in keys])
    return f"{condition} AND {days}", {**values, **bounds}


def _keys(viewer: Viewer, keys: Sequence[TraceKey]) -> tuple[str, dict[str, Any]]:
    """The viewer's rows of the traces by the primary key's prefix (tenants, trace ids: a
    superset when several tenants are listed; callers keep their own pairs)."""
    return (
        f"{viewer.where('Tenant')} AND Tenant IN {{tenants:Array(String)}} "
        "AND TraceId IN {traces:Array(String)}",
        {
            "tenants": sorted({tenant for tenant, _ in keys}),
            "traces": sorted({trace for _, trace in keys}),
            **viewer.parameters,
        },
    )


class ListedSpan(NamedTuple):
    """A span of a listed trace, as the list sums it."""

    tenant: str
    trace_id: str
    failed: bool  # status Error or a GenAI error type
    tool: str
    provider: str
    model: str  # the response model, else the request model
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None


def spans_of(store: ReadableStore, viewer: Viewer, keys: Sequence[TraceKey]) -> list[ListedSpan]:
    """Every span of the traces, once (read by the primary key's prefix on the days they
    are in, without FINAL: one row per span by LIMIT BY)."""
    condition, values = _span_keys(store, viewer, keys)
    rows = store.query(
        "SELECT Tenant, TraceId, StatusCode = 'Error' OR GenAIErrorType != '', "
        f"GenAIToolName, GenAIProvider, {MODEL}, GenAIInputTokens, GenAIOutputTokens, "
        f"GenAITotalTokens FROM spans WHERE {condition} LIMIT 1 BY Tenant, TraceId, SpanId",
        values,
    ).rows
    return [ListedSpan(*row) for row in rows]


class TraceAlerts(NamedTuple):
    """Alerts of one code, severity and kind: of a trace (its tenant and id), or of the
    other traces that started in the range ("", "")."""

    tenant: str
    trace_id: str
    code: str
    severity: str
    kind: str
    alerts: int
    in_range: bool  # on traces that started in the range asked for


def alerts_of(
    store: ReadableStore, viewer: Viewer, keys: Sequence[TraceKey],
    start_ns: int | None = None, end_ns: int | None = None,
) -> list[TraceAlerts]:  # fmt: skip
    """The alerts of the traces `keys` per trace, code, severity and kind and, with a
    range, those of the other traces that started in [start_ns, end_ns) per code, severity
    and kind: one read of `alerts` for the rows' details and the list's counts."""
    condition, values = _keys(viewer, keys)
    in_range = "0"
    if start_ns is not None and end_ns is not None:
        in_range = "TraceStartNs >= {start:Int64} AND TraceStartNs < {end:Int64}"
        values |= {"start": start_ns, "end": end_ns}
    listed = "(Tenant, TraceId) IN {keys:Array(Tuple(String, String))}"
    rows = store.query(
        f"SELECT if({listed}, Tenant, '') AS tenant, if({listed}, TraceId, '') AS trace, "
        f"Code, Severity, Kind, count(), {in_range} AS in_range FROM alerts FINAL "
        f"WHERE {viewer.where('Tenant')} AND ({condition} OR {in_range}) "
        "GROUP BY tenant, trace, Code, Severity, Kind, in_range",
        {**values, "keys": list(keys)},
    ).rows
    return [TraceAlerts(*row[:6], bool(row[6])) for row in rows]


def scores_of(store: ReadableStore, viewer: Viewer, keys: Sequence[TraceKey]) -> list[list[Any]]:
    """Per trace with scores: Tenant, TraceId, scores (by key in `trace_scores`, migration
    0024: the scores' keys per trace). Each key counted once, as `FINAL` would leave it,
    without `FINAL`: with it ClickHouse read ~30x the granules of the traces' keys."""
    condition, values = _keys(viewer, keys)
    return store.query(
        "SELECT Tenant, TraceId, uniqExact(Metric, ScoreId) FROM trace_scores "
        f"WHERE {condition} GROUP BY Tenant, TraceId",
        values,
    ).rows


def newest(
    store: ReadableStore, viewer: Viewer, query: TraceSelection, prices: Prices, limit: int
) -> list[list[Any]]:
    """The roots (as `roots` reads them) of the `limit` newest selected traces, paging and
    sort order aside."""
    return roots(store, viewer, replace(query, sort="start", descending=True, after=None),
                 prices, limit)  # fmt: skip


def trace_facet_counts(
    store: ReadableStore, viewer: Viewer, keys: Sequence[TraceKey], since_ns: int, until_ns: int
) -> list[tuple[str, str, int]]:
    """(facet, value, traces) per agent, tool and model: how many of the traces `keys`
    (whose roots started at or after `since_ns`) have a span of it, from `trace_facets`
    over [since_ns, until_ns) (a trace's spans start after its root): only the rows of
    that window, not the traces' spans. Exact: a trace counted once per value, though
    stored in several rows (spans inserted in several blocks, not merged yet)."""
    rows = store.query(
        "SELECT Facet, Value, uniqExact(Tenant, TraceId) FROM trace_facets "
        f"WHERE {viewer.where('Tenant')} AND Facet IN ('agent', 'tool', 'model') "
        "AND Timestamp >= fromUnixTimestamp64Nano({since:Int64}) "
        "AND Timestamp < fromUnixTimestamp64Nano({until:Int64}) "
        "AND (Tenant, TraceId) IN {keys:Array(Tuple(String, String))} GROUP BY Facet, Value",
        {"since": since_ns, "until": until_ns, "keys": list(keys), **viewer.parameters},
    ).rows
    return [(facet, value, n) for facet, value, n in rows]


def minute_facets(
    store: ReadableStore, viewer: Viewer, start_ns: int, end_ns: int
) -> list[list[Any]]:
    """The spans per ServiceName, GenAIAgentName, GenAIToolName and model (those four,
    spans, root spans) counted per minute (`span_counts`) from the minute of `start_ns` to
    `end_ns`."""
    return store.query(
        "SELECT ServiceName, GenAIAgentName, GenAIToolName, Model, sum(Spans), sum(Roots) "
        f"FROM span_counts WHERE {viewer.where('Tenant')} "
        "AND Minute >= toStartOfMinute(fromUnixTimestamp64Nano({start:Int64})) "
        "AND Minute < fromUnixTimestamp64Nano({end:Int64}) "
        "GROUP BY ServiceName, GenAIAgentName, GenAIToolName, Model",
        {"start": start_ns, "end": end_ns, **viewer.parameters},
    ).rows
