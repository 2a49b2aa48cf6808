"""Typed reads of the trace tables (`spans`, `trace_roots`) for the pages: one viewer's
rows only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas.store import ReadableStore

HOUR_NS = 3_600_000_000_000
"""The span of one row of `trace_counts` (migration 0025), in ns."""


def started_in_range(store: ReadableStore, viewer: Viewer, start_ns: int, end_ns: int) -> int:
    """How many traces have a root that started in [start_ns, end_ns): the union of the
    sets `trace_counts` (migration 0025) holds of the range's whole hours with the traces of
    the roots `trace_roots` holds of its partial hours at either edge, per tenant (a trace
    with roots in several hours, or a root stored twice, is counted once; sets of the ids'
    64-bit hashes: two ids of a tenant sharing one would count once)."""
    first_hour = -(-start_ns // HOUR_NS) * HOUR_NS
    last_hour = max(end_ns // HOUR_NS * HOUR_NS, first_hour)
    rows = store.query(
        "SELECT sum(traces) FROM (SELECT uniqExactMerge(Traces) AS traces FROM ("
        f"SELECT Tenant, Traces FROM trace_counts WHERE {viewer.where('Tenant')} "
        "AND Hour >= toDateTime(intDiv({first_hour:Int64}, 1000000000), 'UTC') "
        "AND Hour < toDateTime(intDiv({last_hour:Int64}, 1000000000), 'UTC') "
        "UNION ALL SELECT Tenant, uniqExactState(cityHash64(TraceId)) AS Traces FROM "
        f"trace_roots WHERE {viewer.where('Tenant')} AND "
        "(Timestamp >= fromUnixTimestamp64Nano({start:Int64}) "
        "AND Timestamp < fromUnixTimestamp64Nano(least({first_hour:Int64}, {end:Int64})) "
        "OR Timestamp >= fromUnixTimestamp64Nano(greatest({last_hour:Int64}, {start:Int64})) "
        "AND Timestamp < fromUnixTimestamp64Nano({end:Int64})) GROUP BY Tenant"
        ") GROUP BY Tenant)",
        {
            "start": start_ns, "end": end_ns, "first_hour": first_hour, "last_hour": last_hour,
            **viewer.parameters,
        },
    ).rows  # fmt: skip
    return (rows[0][0] if rows else 0) or 0


LATEST_ROW_OF_EACH_SPAN = (
    "ORDER BY Tenant, TraceId, SpanId, ReceivedAt DESC LIMIT 1 BY Tenant, TraceId, SpanId"
)
"""Each span's latest row, as FINAL merges them, without FINAL's read of every day (with
`span_times`' condition a read by trace opens only its spans' days)."""


def span_times(
    store: ReadableStore, trace_ids: Sequence[str], tenants: Sequence[str] | None = None
) -> tuple[str, dict[str, Any]]:
    """A condition on `spans.Timestamp` keeping every span of the traces (of `tenants`, or
    of any tenant) (the first and last span start `trace_times` holds of them: migration
    0023, looked up by key in granules of 256 rows), so a read by trace id opens only the
    days those spans are in (`spans` is partitioned by day): ("1", {}) when that table
    holds none of them (a read of every day, as before)."""
    if not trace_ids:
        return "1", {}
    of_tenants = "" if tenants is None else "Tenant IN {tenants:Array(String)} AND "
    rows = store.query(
        "SELECT toUnixTimestamp64Nano(minOrNull(Start)), toUnixTimestamp64Nano(maxOrNull(End)) "
        f"FROM trace_times WHERE {of_tenants}TraceId IN {{traces:Array(String)}}",
        {"tenants": sorted(set(tenants or ())), "traces": sorted(set(trace_ids))},
        readonly=True,
    ).rows
    first, last = rows[0] if rows else (None, None)
    if first is None or last is None:
        return "1", {}
    return (
        "Timestamp >= fromUnixTimestamp64Nano({first_span:Int64}) "
        "AND Timestamp <= fromUnixTimestamp64Nano({last_span:Int64})",
        {"first_span": first, "last_span": last},
    )


def tenants_of(store: ReadableStore, viewer: Viewer, trace_id: str) -> list[str]:
    """The tenants (of the viewer's) holding a span of `trace_id`, in order."""
    rows = store.query(
        f"SELECT DISTINCT Tenant FROM trace_times WHERE {viewer.where('Tenant')} "
        "AND TraceId = {trace:String} ORDER BY Tenant",
        {"trace": trace_id, **viewer.parameters},
    ).rows
    return [tenant for (tenant,) in rows]


def roots_of(
    store: ReadableStore, viewer: Viewer, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """The root of each (tenant, trace id) found: Tenant, TraceId, SpanName,
    GenAIAgentName, GenAIConversationId."""
    if not keys:
        return {}
    rows = store.query(
        "SELECT Tenant, TraceId, SpanName, GenAIAgentName, GenAIConversationId "
        f"FROM trace_roots WHERE {viewer.where('Tenant')} AND Tenant IN "
        "{tenants:Array(String)} AND TraceId IN {traces:Array(String)}",
        {
            "tenants": sorted({tenant for tenant, _ in keys}),
            "traces": sorted({trace for _, trace in keys}),
            **viewer.parameters,
        },
    ).dicts()
    return {(row["Tenant"], row["TraceId"]): row for row in rows}


def run_token_rows(store: ReadableStore, run_id: str) -> list[list[Any]]:
    """Every span of the traces of run `run_id`, by trace: TraceId, GenAIProvider, Model
    (response model, else request model), IsRoot, Duration, input and output tokens (0
    when unknown)."""
    return store.query(
        "SELECT TraceId, GenAIProvider, if(GenAIResponseModel != '', GenAIResponseModel, "
        "GenAIRequestModel) AS Model, ParentSpanId = '' AS IsRoot, Duration, "
        "ifNull(GenAIInputTokens, 0), ifNull(GenAIOutputTokens, 0) FROM spans FINAL "
        "WHERE TraceId IN (SELECT TraceId FROM spans FINAL WHERE EvalRunId = {run:String}) "
        "ORDER BY TraceId",
        {"run": run_id},
    ).rows
