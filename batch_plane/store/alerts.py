"""Typed queries of the `alerts` table (and its `alerts_view`): the alerts page's rows,
counts, facets, chart and coverage over a time range and filters, one viewer's rows only;
`pathgrade alerts`' latest alerts and `--follow`'s poll.

Every read here uses `FINAL` (a stored alert may be written twice; one row remains), and
keyset paging runs on detection time (`before_ns`), newest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas.json_text import parse_json
from pathgrade.schemas.store import ReadableStore

FACETS = {
    "code": "Code", "severity": "Severity", "service": "Service", "agent": "Agent",
    "kind": "Kind",
}  # fmt: skip
"""A filter's name -> the column it keeps to (and the facets the page counts by)."""
LISTED_COLUMNS = "DetectedAt, Tenant, Code, Severity, Service, TraceId, SpanId, Reason"
"""The columns `pathgrade alerts` prints (from `alerts_view`), in order."""


@dataclass(frozen=True)
class AlertFilters:
    """Alerts detected in [start_ns, end_ns) whose columns equal each filter set ("": any)."""

    start_ns: int
    end_ns: int
    code: str = ""
    severity: str = ""
    service: str = ""
    agent: str = ""
    kind: str = ""

    def where(self, viewer: Viewer) -> tuple[str, dict[str, Any]]:
        """Conditions on `alerts` (no paging) and their parameters."""
        conditions = [
            viewer.where("Tenant"),
            "DetectedAtNs >= {start:Int64}",
            "DetectedAtNs < {end:Int64}",
        ]
        values: dict[str, Any] = {"start": self.start_ns, "end": self.end_ns, **viewer.parameters}
        for name, column in FACETS.items():
            if getattr(self, name):
                conditions.append(f"{column} = {{{name}:String}}")
                values[name] = getattr(self, name)
        return " AND ".join(conditions), values


def page(
    store: ReadableStore, viewer: Viewer, filters: AlertFilters, before_ns: int | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` alerts detected before `before_ns` (None: from the newest), newest
    first, as column -> value."""
    where, values = filters.where(viewer)
    paged = where + (" AND DetectedAtNs < {before:Int64}" if before_ns else "")
    return store.query(
        "SELECT DetectedAtNs, Tenant, Code, Name, Severity, Kind, Reason, Service, Agent, "
        f"TraceId, SpanId, Incomplete, ConversationId FROM alerts FINAL WHERE {paged} "
        f"ORDER BY DetectedAtNs DESC, AlertKey LIMIT {int(limit)}",
        {**values, "before": before_ns or 0},
    ).dicts()


def count(store: ReadableStore, viewer: Viewer, filters: AlertFilters) -> int:
    """How many alerts the filters keep."""
    where, values = filters.where(viewer)
    rows = store.query(f"SELECT count() FROM alerts FINAL WHERE {where}", values).rows
    return rows[0][0] if rows else 0


def top(
    store: ReadableStore, viewer: Viewer, filters: AlertFilters, facet: str, limit: int
) -> list[tuple[str, int]]:
    """The `limit` most frequent values of a facet (a name of `FACETS`) among the alerts the
    filters keep, with their counts, most first."""
    column = FACETS[facet]
    where, values = filters.where(viewer)
    rows = store.query(
        f"SELECT {column}, count() AS n FROM alerts FINAL WHERE {where} "
        f"GROUP BY {column} ORDER BY n DESC, {column} LIMIT {int(limit)}",
        values,
    ).rows
    return [(value, n) for value, n in rows]


def top_tools(
    store: ReadableStore, viewer: Viewer, filters: AlertFilters, limit: int
) -> list[tuple[str, int]]:
    """The `limit` tools whose spans the most alerts are pinned to, with their counts. The
    spans are read from `tool_spans` (migration 0022: the spans of a tool), from the first
    start of the alerts' turns to the last end or detection (a turn's spans start within
    its top span, `TraceStartNs`-`TraceEndNs`, and before they are detected), so only the
    days of those alerts are opened."""
    where, values = filters.where(viewer)
    pinned = f"FROM alerts FINAL WHERE {where} AND SpanId != ''"
    rows = store.query(
        "SELECT GenAIToolName, count() AS n FROM tool_spans WHERE "
        f"{viewer.where('Tenant')} "
        f"AND Timestamp >= fromUnixTimestamp64Nano((SELECT min(TraceStartNs) {pinned})) "
        "AND Timestamp <= fromUnixTimestamp64Nano("
        f"(SELECT max(greatest(TraceEndNs, DetectedAtNs)) {pinned})) "
        f"AND (Tenant, TraceId, SpanId) IN (SELECT Tenant, TraceId, SpanId {pinned}) "
        f"GROUP BY GenAIToolName ORDER BY n DESC, GenAIToolName LIMIT {int(limit)}",
        values,
    ).rows
    return [(tool, n) for tool, n in rows]


def per_interval(
    store: ReadableStore, viewer: Viewer, filters: AlertFilters, first_ns: int, step_ns: int
) -> list[tuple[int, str, int]]:
    """(interval, code, alerts) for each code of each interval of `step_ns` from `first_ns`
    (interval 0 starts there), ordered by code."""
    where, values = filters.where(viewer)
    rows = store.query(
        "SELECT intDiv(DetectedAtNs - {first:Int64}, {step:Int64}) AS b, Code, count() "
        f"FROM alerts FINAL WHERE {where} GROUP BY b, Code ORDER BY Code",
        {**values, "first": first_ns, "step": step_ns},
    ).rows
    return [(bucket, code, n) for bucket, code, n in rows]


@dataclass(frozen=True)
class Undecided:
    """The traces a detector code could not decide on for one missing input."""

    code: str
    name: str
    missing: str
    traces: int
    example: str  # one of the findings' reasons


def undecided(store: ReadableStore, viewer: Viewer, start_ns: int, end_ns: int) -> list[Undecided]:
    """Per code and missing input, the `cannot_decide` findings detected in the range,
    ordered by code and missing input."""
    rows = store.query(
        "SELECT Code, any(Name), JSONExtractString(Details, 'missing') AS missing, "
        "uniqExact(Tenant, TraceId), any(Reason) FROM alerts FINAL WHERE "
        f"{viewer.where('Tenant')} AND Kind = 'cannot_decide' "
        "AND DetectedAtNs >= {start:Int64} AND DetectedAtNs < {end:Int64} "
        "GROUP BY Code, missing ORDER BY Code, missing",
        {"start": start_ns, "end": end_ns, **viewer.parameters},
    ).rows
    return [Undecided(*row) for row in rows]


def latest_statement(
    since_ns: int | None, code: str | None, limit: int
) -> tuple[str, dict[str, Any]]:
    """The SQL (over `alerts_view`) and parameters of the `limit` latest alerts detected
    since `since_ns` (None: ever) of `code` (None: any), newest first."""
    where, parameters = [], {}
    if since_ns is not None:
        where.append("DetectedAtNs >= {since:Int64}")
        parameters["since"] = since_ns
    if code:
        where.append("Code = {code:String}")
        parameters["code"] = code
    sql = (
        f"SELECT {LISTED_COLUMNS} FROM alerts_view"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + f" ORDER BY DetectedAtNs DESC, AlertKey LIMIT {int(limit)}"
    )
    return sql, parameters


def follow_statement(code: str | None) -> str:
    """The SQL of the alerts detected since `{since:Int64}` (Unix ns) of `{code:String}`
    (without `code`: any), oldest first: their key and detection time (ns), then
    `LISTED_COLUMNS`."""
    where = "DetectedAtNs >= {since:Int64}" + (" AND Code = {code:String}" if code else "")
    return (
        f"SELECT AlertKey, DetectedAtNs, {LISTED_COLUMNS} FROM alerts_view WHERE {where} "
        "ORDER BY DetectedAtNs, AlertKey"
    )


class TraceAlert(NamedTuple):
    """A stored alert of one trace, pinned to a span."""

    code: str
    name: str
    severity: str
    kind: str
    reason: str
    span_id: str
    details: dict[str, Any]  # the stored JSON object ({} when none)
    turn_span_id: str  # the top span of the turn it was raised on ("": older rows)


def of_trace(store: ReadableStore, tenant: str, trace_id: str) -> list[TraceAlert]:
    """The trace's alerts, violations before undecided checks, by code and span."""
    rows = store.query(
        "SELECT Code, Name, Severity, Kind, Reason, SpanId, Details, TurnSpanId "
        "FROM alerts FINAL WHERE Tenant = {tenant:String} AND TraceId = {trace:String} "
        "ORDER BY Kind DESC, Code, SpanId",
        {"tenant": tenant, "trace": trace_id},
    ).rows
    return [TraceAlert(*row[:6], _object(row[6]), row[7]) for row in rows]


def _object(text: str) -> dict[str, Any]:
    """A stored JSON object ({} for anything else)."""
    value = parse_json(text)
    return value if isinstance(value, dict) else {}


def violations_of(store: ReadableStore, trace_ids: Sequence[str]) -> list[tuple[str, str, str]]:
    """(trace id, code, span id) of the violations stored for the traces, by code and span."""
    rows = store.query(
        "SELECT TraceId, Code, SpanId FROM alerts FINAL WHERE TraceId IN {ids:Array(String)} "
        "AND Kind = 'violation' ORDER BY Code, SpanId",
        {"ids": list(trace_ids)},
        readonly=True,
    ).rows
    return [(trace_id, code, span_id) for trace_id, code, span_id in rows]
