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
TOOL = "tool"
"""The count of `tallies` per tool of the span an alert is pinned to (column `Tool`,
migration 0026; alerts on a span that calls none are not counted)."""
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
        f"TraceId, SpanId, Tool, Incomplete, ConversationId FROM alerts FINAL WHERE {paged} "
        f"ORDER BY DetectedAtNs DESC, AlertKey LIMIT {int(limit)}",
        {**values, "before": before_ns or 0},
    ).dicts()


@dataclass(frozen=True)
class AlertTallies:
    """The alerts the filters keep, counted in one read: in all, per value of each facet
    (a name of `FACETS`) and of `TOOL`, and per interval and code."""

    total: int
    per_value: dict[str, dict[str, int]]  # facet or TOOL -> value -> alerts
    per_interval: list[tuple[int, str, int]]  # (interval, code, alerts)

    def top(self, facet: str, limit: int) -> list[tuple[str, int]]:
        """The `limit` most frequent values of a facet with their counts, most first (then
        by value)."""
        return sorted(self.per_value[facet].items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


def tallies(
    store: ReadableStore, viewer: Viewer, filters: AlertFilters, first_ns: int, step_ns: int
) -> AlertTallies:
    """The alerts the filters keep counted in all, per facet value, per tool and per
    interval of `step_ns` from `first_ns` (interval 0 starts there) and code: one read of
    `alerts` (`sumMap` per facet), not one per count."""
    where, values = filters.where(viewer)
    per_facet = ", ".join(f"sumMap([{column}], [toUInt64(1)])" for column in FACETS.values())
    interval = "intDiv(DetectedAtNs - {first:Int64}, {step:Int64})"
    total, *facets, (intervals, counts) = store.query(
        f"SELECT count(), {per_facet}, sumMap([Tool], [toUInt64(Tool != '')]), "
        f"sumMap([({interval}, Code)], [toUInt64(1)]) FROM alerts FINAL WHERE {where}",
        {**values, "first": first_ns, "step": step_ns},
    ).rows[0]
    per_value = {
        facet: dict(zip(*pairs, strict=True))
        for facet, pairs in zip([*FACETS, TOOL], facets, strict=True)
    }
    counted = [(bucket, code, n) for (bucket, code), n in zip(intervals, counts, strict=True)]
    return AlertTallies(total, per_value, counted)


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


def alerted(store: ReadableStore, viewer: Viewer, trace_id: str) -> bool:
    """Whether an alert (of the viewer's) names `trace_id`."""
    rows = store.query(
        f"SELECT count() > 0 FROM alerts WHERE {viewer.where('Tenant')} "
        "AND TraceId = {trace:String}",
        {"trace": trace_id, **viewer.parameters},
    ).rows
    return bool(rows[0][0])


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
