"""Rows of the `spans` table back into canonical `Trace`s (the reverse of span_rows), with
the log records of the `logs` table joined to their spans (`content.events.join_records`:
the detectors and the trace page read a span's events from either carrier), and the stored
traces found by a `--where` filter.

Attribute values come back as the text the table stores (see `span_rows.attribute_text`);
captured content (ContentAttributes, EventContentAttributes) joins the attributes again
while the store still holds it; the facts stay among them (`Span.facts`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pathgrade.batch_plane.store.traces import LATEST_ROW_OF_EACH_SPAN, span_times
from pathgrade.content.events import join_records
from pathgrade.schemas.json_text import parse_json
from pathgrade.schemas.model import (
    EvalContext,
    GenAIFields,
    LogRecord,
    Span,
    SpanEvent,
    SpanLink,
    Trace,
)
from pathgrade.schemas.store import ReadableStore

_SPAN_COLUMNS = """
SELECT Tenant, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName,
       ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, ContentAttributes,
       toUnixTimestamp64Nano(Timestamp) AS StartNs, Duration, StatusCode, StatusMessage,
       arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp) AS EventNs,
       Events.Name AS EventNames, Events.Attributes AS EventAttributes,
       Links.TraceId AS LinkTraceIds, Links.SpanId AS LinkSpanIds,
       Links.TraceState AS LinkStates, Links.Attributes AS LinkAttributes,
       EventContentAttributes,
       GenAIOperation, GenAIProvider, GenAIAgentName, GenAIAgentId, GenAIToolName,
       GenAIToolCallId, GenAIToolType, GenAIToolArguments, GenAIToolResult,
       GenAIConversationId, GenAIRequestModel, GenAIResponseModel, GenAIInputTokens,
       GenAIOutputTokens, GenAITotalTokens, GenAIErrorType, GenAIInputMessages,
       GenAIOutputMessages, EvalDatasetItemId, EvalRunId, EvalReplayIndex, EvalVariantId,
       EvalSuiteVersion, toUnixTimestamp64Nano(ReceivedAt) AS ReceivedNs
"""
SPAN_SELECT = _SPAN_COLUMNS + "FROM spans\n"


def span_from_row(row: dict[str, Any]) -> Span:
    """One `SPAN_SELECT` row as a canonical span."""
    start = int(row["StartNs"])
    attributes = {**row["SpanAttributes"], **row["ContentAttributes"]}
    event_content = row["EventContentAttributes"]
    if len(event_content) != len(row["EventNames"]):  # cleared by the content retention
        event_content = [{}] * len(row["EventNames"])
    return Span(
        tenant=row["Tenant"], trace_id=row["TraceId"], span_id=row["SpanId"],
        parent_span_id=row["ParentSpanId"], name=row["SpanName"], kind=row["SpanKind"],
        start_ns=start, end_ns=start + int(row["Duration"]), service_name=row["ServiceName"],
        trace_state=row["TraceState"], resource_attributes=dict(row["ResourceAttributes"]),
        scope_name=row["ScopeName"], scope_version=row["ScopeVersion"],
        attributes=attributes, status_code=row["StatusCode"],
        status_message=row["StatusMessage"],
        events=[
            SpanEvent(int(t), n, {**a, **c})
            for t, n, a, c in zip(
                row["EventNs"], row["EventNames"], row["EventAttributes"], event_content,
                strict=True,
            )
        ],
        links=[
            SpanLink(t, s, st, dict(a))
            for t, s, st, a in zip(
                row["LinkTraceIds"], row["LinkSpanIds"], row["LinkStates"],
                row["LinkAttributes"], strict=True,
            )
        ],
        genai=GenAIFields(
            operation=row["GenAIOperation"], provider_name=row["GenAIProvider"],
            agent_name=row["GenAIAgentName"], agent_id=row["GenAIAgentId"],
            tool_name=row["GenAIToolName"], tool_call_id=row["GenAIToolCallId"],
            tool_type=row["GenAIToolType"], tool_arguments=row["GenAIToolArguments"],
            tool_result=row["GenAIToolResult"], conversation_id=row["GenAIConversationId"],
            request_model=row["GenAIRequestModel"], response_model=row["GenAIResponseModel"],
            input_tokens=row["GenAIInputTokens"], output_tokens=row["GenAIOutputTokens"],
            total_tokens=row["GenAITotalTokens"], error_type=row["GenAIErrorType"],
            input_messages=row["GenAIInputMessages"], output_messages=row["GenAIOutputMessages"],
        ),
        eval=EvalContext(
            dataset_item_id=row["EvalDatasetItemId"], run_id=row["EvalRunId"],
            replay_index=row["EvalReplayIndex"], variant_id=row["EvalVariantId"],
            suite_version=row["EvalSuiteVersion"],
        ),
        received_at_ns=int(row["ReceivedNs"]),
    )  # fmt: skip


LOG_SELECT = """
SELECT Tenant, TraceId, SpanId, toUnixTimestamp64Nano(Timestamp) AS TimeNs, TraceFlags,
       SeverityText, SeverityNumber, ServiceName, Body, ResourceAttributes, ScopeName,
       ScopeVersion, LogAttributes, EventName, ContentAttributes,
       toUnixTimestamp64Nano(ReceivedAt) AS ReceivedNs, RecordHash
FROM logs FINAL
"""


LATEST_LOG_OF_EACH_KEY = (
    "ORDER BY ReceivedNs DESC LIMIT 1 BY Tenant, TraceId, SpanId, TimeNs, RecordHash"
)
"""A record resent a day later lands in another `logs` partition, which `FINAL` does not
merge across (client.SESSION_SETTINGS): keep its latest arrival, as `FINAL` would."""


def stored_body(text: str) -> Any:
    """A record's stored `Body` as the record had it: a map body (a per-message event's
    message) back as a map, other bodies as their text, None when there is none (or the
    content retention cleared it)."""
    if text.startswith("{"):
        parsed = parse_json(text)
        if isinstance(parsed, dict):
            return parsed
    return text or None


def record_from_row(row: dict[str, Any]) -> LogRecord:
    """One `LOG_SELECT` row as a canonical record (the store keeps one time: it is both
    the record's time and its observed time)."""
    time_ns = int(row["TimeNs"])
    return LogRecord(
        tenant=row["Tenant"], trace_id=row["TraceId"], span_id=row["SpanId"],
        time_ns=time_ns, observed_ns=time_ns, event_name=row["EventName"],
        severity_number=int(row["SeverityNumber"]), severity_text=row["SeverityText"],
        body=stored_body(row["Body"]),
        attributes={**row["LogAttributes"], **row["ContentAttributes"]},
        service_name=row["ServiceName"], resource_attributes=dict(row["ResourceAttributes"]),
        scope_name=row["ScopeName"], scope_version=row["ScopeVersion"],
        flags=int(row["TraceFlags"]), received_at_ns=int(row["ReceivedNs"]),
    )  # fmt: skip


def join_stored_records(store: ReadableStore, traces: Sequence[Trace]) -> None:
    """Tie the stored records of `traces` to their spans (records of a span not stored
    are left out)."""
    if not traces:
        return
    rows = store.query(  # by trace id alone: tuples do not survive a remote store's JSON
        LOG_SELECT + "WHERE TraceId IN {ids:Array(String)} " + LATEST_LOG_OF_EACH_KEY,
        {"ids": sorted({t.trace_id for t in traces})},
        readonly=True,
    ).dicts()
    by_span: dict[tuple[str, str, str], list[LogRecord]] = defaultdict(list)
    for row in rows:
        record = record_from_row(row)
        by_span[(record.tenant, record.trace_id, record.span_id)].append(record)
    for trace in traces:
        for span in trace.spans:
            records = by_span.get((span.tenant, span.trace_id, span.span_id))
            if records:
                join_records(span, records)


def traces_from_rows(rows: list[dict[str, Any]]) -> list[Trace]:
    """`SPAN_SELECT` rows grouped into traces (by tenant and trace id), in first-seen order."""
    grouped: dict[tuple[str, str], list[Span]] = defaultdict(list)
    for row in rows:
        span = span_from_row(row)
        grouped[(span.tenant, span.trace_id)].append(span)
    return [Trace(tenant, trace_id, spans) for (tenant, trace_id), spans in grouped.items()]


def trace_from_rows(rows: list[dict[str, Any]]) -> Trace:
    """The one trace in `rows`; ValueError when there are none or several."""
    traces = traces_from_rows(rows)
    if len(traces) != 1:
        raise ValueError(f"expected the rows of one trace, got {len(traces)} traces")
    return traces[0]


def load_trace(store: ReadableStore, tenant: str, trace_id: str) -> Trace | None:
    """The stored spans of one trace, or None when none is stored (yet). Each span's latest
    row, as FINAL would merge them, but read by the primary key alone (FINAL over a large
    table costs far more than the trace), on the days its spans are in (`traces.span_times`)."""
    days, bounds = span_times(store, [trace_id], [tenant])
    rows = store.query(
        SPAN_SELECT + "WHERE Tenant = {tenant:String} AND TraceId = {trace:String} "
        f"AND {days} {LATEST_ROW_OF_EACH_SPAN}",
        {"tenant": tenant, "trace": trace_id, **bounds},
    ).dicts()
    if not rows:
        return None
    trace = trace_from_rows(rows)
    join_stored_records(store, [trace])
    return trace


class FilterError(ValueError):
    """A `--where` filter that is refused before it reaches the store."""


def check_filter(where: str) -> str:
    """`where` as given, or FilterError: it must be one boolean expression (no `;`)."""
    if not where.strip():
        raise FilterError("--where: empty filter (use a ClickHouse boolean expression)")
    if ";" in where:
        raise FilterError("--where: `;` is not allowed: give one boolean expression")
    return where


def find_trace_ids(
    store: ReadableStore, where: str, limit: int | None = None, since_ns: int | None = None
) -> list[str]:
    """Ids of the stored traces with at least one span matching `where` (run read-only),
    first seen first; with `since_ns`, only spans that started at or after it count."""
    since = "" if since_ns is None else f" AND toUnixTimestamp64Nano(Timestamp) >= {int(since_ns)}"
    sql = (
        "SELECT TraceId, min(Timestamp) AS FirstSeen FROM spans FINAL "
        f"WHERE ({check_filter(where)}){since} GROUP BY TraceId ORDER BY FirstSeen, TraceId"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [row[0] for row in store.query(sql, readonly=True).rows]


def load_traces(store: ReadableStore, trace_ids: Sequence[str]) -> list[Trace]:
    """The stored traces with these ids, in the given order: each span's latest row, as FINAL
    would merge them, but read by the primary key on the days their spans are in
    (`span_times`: FINAL reads every day's partition)."""
    if not trace_ids:
        return []
    days, bounds = span_times(store, trace_ids)
    rows = store.query(
        SPAN_SELECT
        + f"WHERE TraceId IN {{ids:Array(String)}} AND {days} "
        + LATEST_ROW_OF_EACH_SPAN,
        {"ids": list(trace_ids), **bounds},
        readonly=True,
    ).dicts()
    order = {trace_id: index for index, trace_id in enumerate(trace_ids)}
    traces = sorted(traces_from_rows(rows), key=lambda t: (order[t.trace_id], t.tenant))
    join_stored_records(store, traces)
    return traces


def run_trace_ids(store: ReadableStore, run_id: str) -> list[tuple[str, str]]:
    """(tenant, trace id) of every trace with a span of run `run_id`, in time order."""
    rows = store.query(
        "SELECT Tenant, TraceId FROM spans FINAL WHERE EvalRunId = {run:String} "
        "GROUP BY Tenant, TraceId ORDER BY min(Timestamp), TraceId",
        {"run": run_id},
    ).rows
    return [(tenant, trace_id) for tenant, trace_id in rows]
