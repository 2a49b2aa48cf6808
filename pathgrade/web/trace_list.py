"""The trace list: a time range of traces with filters, a free-text search over span names,
two sort orders, keyset paging on the store, and counts per filter value.

A trace is listed by its root span (table `trace_roots`, sorted by tenant and time, so a
page reads only its end of the range). Filters on what a trace's other spans did (agent,
tool, model, conversation, error, span name, cost) and on its alerts and scores select
`(Tenant, TraceId)` pairs with a sub-query each. Spans of a trace are looked for from the
range's start to a day past its end (`SPAN_SLACK_NS`): a trace's spans start after its root.
Every query is scoped to the viewer's tenant. The URL holds the whole query.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pathgrade.detectors.prices import PriceTable, cost_usd
from pathgrade.web import params as p
from pathgrade.web.store_reads import ReadStore
from pathgrade.web.viewers import Viewer

PAGE_SIZE = 50
DEFAULT_FROM = "24h"
SPAN_SLACK_NS = 86_400 * 10**9
SORTS = ("start", "duration")
ORDERS = ("desc", "asc")
SEVERITIES = ("low", "medium", "high", "critical")
FACET_VALUES = 12  # most frequent values shown per facet
FACET_TRACES = 1_000  # a filtered list's counts are over its newest this many traces
_SORT_COLUMN = {"start": "Timestamp", "duration": "Duration"}
_FILTER_NAMES = (
    "service", "agent", "tool", "model", "conversation", "code", "severity", "alert", "score",
    "error", "min_ms", "max_ms", "min_cost", "max_cost", "q", "run",
)  # fmt: skip
MODEL = "if(GenAIResponseModel != '', GenAIResponseModel, GenAIRequestModel)"


@dataclass(frozen=True)
class Cursor:
    """Where the next page starts: the last row's sort value, trace id and tenant."""

    value: int
    trace_id: str
    tenant: str

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
class TraceQuery:
    """One trace-list query as the URL gives it."""

    start_ns: int
    end_ns: int
    raw: Mapping[str, str] = field(default_factory=dict)  # the URL's values, for links
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
    after: Cursor | None = None

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


def cost_expression(prices: PriceTable) -> str:
    """SQL: a span's list-price cost in USD from its tokens and model (NaN for a model the
    table lacks; 0 for a span without tokens), matching a model by exact name, then by
    longest dated prefix, as `PriceTable.price_of` does without a provider."""
    conditions, inputs, outputs = [], [], []
    for price in sorted(prices.models, key=lambda m: -len(m.model)):
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


def _span_conditions(query: TraceQuery) -> list[tuple[str, dict[str, Any]]]:
    """Conditions on single spans, each selecting the traces with such a span."""
    found: list[tuple[str, dict[str, Any]]] = []
    if query.agent:
        found.append(("GenAIAgentName = {agent:String}", {"agent": query.agent}))
    if query.tool:
        found.append(("GenAIToolName = {tool:String}", {"tool": query.tool}))
    if query.model:
        found.append((f"{MODEL} = {{model:String}}", {"model": query.model}))
    if query.conversation:
        found.append(("GenAIConversationId = {conv:String}", {"conv": query.conversation}))
    if query.text:
        found.append(("positionCaseInsensitiveUTF8(SpanName, {q:String}) > 0", {"q": query.text}))
    return found


def _root_filters(query: TraceQuery, viewer: Viewer, prices: PriceTable) -> _Sql:
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
    if query.error is not None:
        negate = "" if query.error else "NOT "
        sql.add(
            f"(Tenant, TraceId) {negate}IN (SELECT Tenant, TraceId FROM spans WHERE "
            f"{spans_in_range} AND (StatusCode = 'Error' OR GenAIErrorType != ''))"
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


def list_traces(
    store: ReadStore, viewer: Viewer, query: TraceQuery, prices: PriceTable,
    page_size: int = PAGE_SIZE,
) -> TracePage:  # fmt: skip
    """One page of the list (with the cursor of the next) and the facet counts."""
    sql = _root_filters(query, viewer, prices)
    column = _SORT_COLUMN[query.sort]
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
    rows = store.rows(
        "SELECT Tenant, TraceId, toUnixTimestamp64Nano(Timestamp), Duration, SpanName, "
        "ServiceName, GenAIAgentName, GenAIConversationId, StatusCode, EvalRunId, "
        f"EvalDatasetItemId FROM trace_roots WHERE {sql.where} "
        f"ORDER BY {column} {direction}, TraceId {direction}, Tenant {direction} "
        f"LIMIT {int(page_size) + 1}",
        sql.parameters,
    )
    unique = {(row[0], row[1]): row for row in rows}  # a root stored twice, not merged yet
    traces = [TraceRow(*row) for row in list(unique.values())[:page_size]]
    next_cursor = None
    if len(rows) > page_size and traces:
        last = traces[-1]
        value = last.start_ns if query.sort == "start" else last.duration_ns
        next_cursor = Cursor(value, last.trace_id, last.tenant)
    _add_details(store, viewer, traces, prices)
    return TracePage(traces, next_cursor, facets(store, viewer, query, prices))


def _keys(traces: Sequence[TraceRow]) -> tuple[str, dict[str, Any]]:
    """SQL selecting the rows of `traces` by the primary key's prefix (tenants, trace ids:
    a superset when several tenants are listed; callers keep their own pairs)."""
    return (
        "Tenant IN {tenants:Array(String)} AND TraceId IN {traces:Array(String)}",
        {
            "tenants": sorted({t.tenant for t in traces}),
            "traces": sorted({t.trace_id for t in traces}),
        },
    )


def _add_details(
    store: ReadStore, viewer: Viewer, traces: list[TraceRow], prices: PriceTable
) -> None:
    """Span counts, errors, tools, models, tokens, cost, alerts and scores of each row.

    The page's spans are read by the primary key's prefix without FINAL (one row per span
    by LIMIT BY) and summed here, cost with `detectors.prices.cost_usd` as on the trace
    page: cheaper than ClickHouse planning the aggregates and the price table for a few
    hundred rows."""
    if not traces:
        return
    condition, values = _keys(traces)
    values.update(viewer.parameters)
    scope = viewer.where("Tenant")
    by_key = {(t.tenant, t.trace_id): t for t in traces}
    tools: dict[tuple[str, str], set[str]] = defaultdict(set)
    models: dict[tuple[str, str], set[str]] = defaultdict(set)
    unpriced: set[tuple[str, str]] = set()  # a model the price table lacks: no cost
    for tenant, trace_id, failed, tool, provider, model, tokens_in, tokens_out, total in store.rows(
        "SELECT Tenant, TraceId, StatusCode = 'Error' OR GenAIErrorType != '', "
        f"GenAIToolName, GenAIProvider, {MODEL}, GenAIInputTokens, GenAIOutputTokens, "
        f"GenAITotalTokens FROM spans WHERE {scope} AND {condition} "
        "LIMIT 1 BY Tenant, TraceId, SpanId",
        values,
    ):
        row = by_key.get((tenant, trace_id))
        if row is None:
            continue
        row.spans += 1
        row.errors += bool(failed)
        if tool:
            tools[(tenant, trace_id)].add(tool)
        if model:
            models[(tenant, trace_id)].add(model)
        row.tokens += total if total is not None else (tokens_in or 0) + (tokens_out or 0)
        if tokens_in or tokens_out:
            cost = cost_usd(model, provider, tokens_in or 0, tokens_out or 0, prices)
            if cost is None:
                unpriced.add((tenant, trace_id))
            row.cost_usd = (row.cost_usd or 0.0) + (cost or 0.0)
    for key, row in by_key.items():
        row.tools, row.models = sorted(tools[key]), sorted(models[key])
        if key in unpriced:
            row.cost_usd = None
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    for tenant, trace_id, alerts, codes, severities in store.rows(
        "SELECT Tenant, TraceId, countIf(Kind = 'violation'), groupUniqArray(Code), "
        f"groupUniqArrayIf(Severity, Kind = 'violation') FROM alerts FINAL WHERE {scope} "
        f"AND {condition} GROUP BY Tenant, TraceId",
        values,
    ):
        if (tenant, trace_id) not in by_key:
            continue
        row = by_key[(tenant, trace_id)]
        row.alerts, row.codes = alerts, sorted(codes)
        row.severity = max(severities, key=lambda s: rank.get(s, -1), default="")
    for tenant, trace_id, scores in store.rows(
        f"SELECT Tenant, TraceId, count() FROM scores FINAL WHERE {scope} AND {condition} "
        "GROUP BY Tenant, TraceId",
        values,
    ):
        if (tenant, trace_id) in by_key:
            by_key[(tenant, trace_id)].scores = scores


def facets(
    store: ReadStore, viewer: Viewer, query: TraceQuery, prices: PriceTable
) -> dict[str, list[tuple[str, int]]]:
    """The most frequent values of each filter among the traces the filters select: traces
    per service, spans per agent, tool and model, alerts per detector code and severity.

    Without filters the counts come from `span_counts` (per minute: the range is rounded
    out to whole minutes); with filters, over the newest FACET_TRACES matching traces
    (found once, then read by primary key)."""
    sql = _root_filters(query, viewer, prices)
    if query.filtered:
        newest = [
            TraceRow(tenant, trace_id, 0, 0, "", "", "", "", "", "", "")
            for tenant, trace_id in store.rows(
                f"SELECT Tenant, TraceId FROM trace_roots WHERE {sql.where} "
                f"ORDER BY Timestamp DESC LIMIT {FACET_TRACES}",
                sql.parameters,
            )
        ]
        if not newest:
            return {}
        chosen, keys = _keys(newest)
        sql.parameters.update(keys)
        per_span = store.rows(
            f"SELECT ServiceName, GenAIAgentName, GenAIToolName, {MODEL} AS m, count(), "
            f"countIf(ParentSpanId = '') FROM spans WHERE {viewer.where('Tenant')} AND "
            f"{chosen} GROUP BY ServiceName, GenAIAgentName, GenAIToolName, m",
            sql.parameters,
        )
        alert_scope = chosen
    else:
        per_span = store.rows(
            "SELECT ServiceName, GenAIAgentName, GenAIToolName, Model, sum(Spans), sum(Roots) "
            f"FROM span_counts WHERE {viewer.where('Tenant')} "
            "AND Minute >= toStartOfMinute(fromUnixTimestamp64Nano({start:Int64})) "
            "AND Minute < fromUnixTimestamp64Nano({end:Int64}) "
            "GROUP BY ServiceName, GenAIAgentName, GenAIToolName, Model",
            sql.parameters,
        )
        alert_scope = "TraceStartNs >= {start:Int64} AND TraceStartNs < {end:Int64}"
    counted: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for service, agent, tool, model, spans, roots in per_span:
        if roots:
            counted["service"][service] += roots
        for facet, value in (("agent", agent), ("tool", tool), ("model", model)):
            if value:
                counted[facet][value] += spans
    for code, severity, n in store.rows(
        f"SELECT Code, Severity, count() FROM alerts FINAL WHERE {viewer.where('Tenant')} "
        f"AND {alert_scope} GROUP BY Code, Severity",
        sql.parameters,
    ):
        counted["code"][code] += n
        counted["severity"][severity] += n
    return {
        facet: sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))[:FACET_VALUES]
        for facet, values in counted.items()
    }
