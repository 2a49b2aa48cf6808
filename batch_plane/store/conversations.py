"""Typed reads of one conversation's traces (the spans, alerts and scores of every trace
with a span of the conversation), one viewer's rows only. The traces are looked up by key in
`conversation_traces` (migration 0019), not among the spans; alerts and scores choose them
with GLOBAL IN (on a sharded store a conversation's traces live on several shards), the
spans by their keys on the days their spans are in (`traces.span_times`)."""

from __future__ import annotations

from typing import Any, NamedTuple

from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.batch_plane.store.traces import LATEST_ROW_OF_EACH_SPAN, span_times
from pathgrade.schemas.store import ReadableStore


class ConversationSpan(NamedTuple):
    """A span of one of the conversation's traces, as the conversation page draws it."""

    tenant: str
    trace_id: str
    start_ns: int
    duration_ns: int
    name: str
    parent_span_id: str
    operation: str
    agent: str
    tool: str
    error: bool  # status Error or a GenAI error type
    chat_input: str  # a chat span's input messages ("" for other spans)


_TRACES = (
    "SELECT DISTINCT Tenant, TraceId FROM conversation_traces "
    "WHERE {of_viewer} AND ConversationId = {{conversation:String}}"
)


def _chosen(viewer: Viewer, conversation_id: str) -> tuple[str, dict[str, Any]]:
    """The condition keeping the conversation's traces, and its parameters."""
    condition = f"(Tenant, TraceId) GLOBAL IN ({_TRACES.format(of_viewer=viewer.where('Tenant'))})"
    return condition, {"conversation": conversation_id, **viewer.parameters}


def _keys(store: ReadableStore, viewer: Viewer, conversation_id: str) -> list[tuple[str, str]]:
    """(tenant, trace id) of each trace with a span of the conversation."""
    rows = store.query(
        _TRACES.format(of_viewer=viewer.where("Tenant")) + " ORDER BY Tenant, TraceId",
        {"conversation": conversation_id, **viewer.parameters},
    ).rows
    return [(tenant, trace) for tenant, trace in rows]


def spans(
    store: ReadableStore, viewer: Viewer, conversation_id: str, limit: int
) -> list[ConversationSpan]:
    """Up to `limit` spans of the conversation's traces, by start time: each span's latest
    row, as FINAL would merge them, but read by the primary key on the days the traces'
    spans are in (FINAL reads every day's partition)."""
    keys = _keys(store, viewer, conversation_id)
    if not keys:
        return []
    days, bounds = span_times(store, [trace for _, trace in keys], [tenant for tenant, _ in keys])
    rows = store.query(
        "SELECT Tenant, TraceId, StartNs, Duration, SpanName, ParentSpanId, GenAIOperation, "
        "GenAIAgentName, GenAIToolName, Failed, ChatInput FROM ("
        "SELECT Tenant, TraceId, SpanId, toUnixTimestamp64Nano(Timestamp) AS StartNs, Duration, "
        "SpanName, ParentSpanId, GenAIOperation, GenAIAgentName, GenAIToolName, "
        "StatusCode = 'Error' OR GenAIErrorType != '' AS Failed, "
        "if(GenAIOperation = 'chat', GenAIInputMessages, '') AS ChatInput FROM spans "
        f"WHERE {viewer.where('Tenant')} AND (Tenant, TraceId) IN "
        f"{{keys:Array(Tuple(String, String))}} AND {days} "
        f"{LATEST_ROW_OF_EACH_SPAN}) ORDER BY StartNs, SpanId LIMIT {int(limit)}",
        {"keys": keys, **bounds, **viewer.parameters},
    ).rows
    return [ConversationSpan(*row) for row in rows]


def _per_trace(
    store: ReadableStore, viewer: Viewer, conversation_id: str, table: str, columns: str, order: str
) -> list[list[Any]]:
    """Tenant, TraceId and `columns` of `table`'s rows on the conversation's traces."""
    chosen, values = _chosen(viewer, conversation_id)
    return store.query(
        f"SELECT Tenant, TraceId, {columns} FROM {table} FINAL WHERE {chosen} ORDER BY {order}",
        values,
    ).rows


def alerts(store: ReadableStore, viewer: Viewer, conversation_id: str) -> list[list[Any]]:
    """(tenant, trace id, code, severity, reason) of the alerts on the conversation's
    traces, by code."""
    return _per_trace(store, viewer, conversation_id, "alerts", "Code, Severity, Reason", "Code")


def scores(store: ReadableStore, viewer: Viewer, conversation_id: str) -> list[list[Any]]:
    """(tenant, trace id, metric, value, label) of the scores of the conversation's
    traces, by metric."""
    return _per_trace(store, viewer, conversation_id, "scores", "Metric, Value, Label", "Metric")
