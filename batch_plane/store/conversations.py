"""Typed reads of one conversation's traces (the spans, alerts and scores of every trace
with a span of the conversation), one viewer's rows only. The traces are chosen with
GLOBAL IN: on a sharded store a conversation's traces live on several shards."""

from __future__ import annotations

from typing import Any, NamedTuple

from pathgrade.batch_plane.store.tenancy import Viewer
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


def _chosen(viewer: Viewer, conversation_id: str) -> tuple[str, dict[str, Any]]:
    """The condition keeping the conversation's traces, and its parameters."""
    condition = (
        "(Tenant, TraceId) GLOBAL IN (SELECT Tenant, TraceId FROM spans "
        f"WHERE {viewer.where('Tenant')} AND GenAIConversationId = {{conversation:String}})"
    )
    return condition, {"conversation": conversation_id, **viewer.parameters}


def spans(
    store: ReadableStore, viewer: Viewer, conversation_id: str, limit: int
) -> list[ConversationSpan]:
    """Up to `limit` spans of the conversation's traces, by start time."""
    chosen, values = _chosen(viewer, conversation_id)
    rows = store.query(
        "SELECT Tenant, TraceId, toUnixTimestamp64Nano(Timestamp), Duration, SpanName, "
        "ParentSpanId, GenAIOperation, GenAIAgentName, GenAIToolName, "
        "StatusCode = 'Error' OR GenAIErrorType != '', "
        "if(GenAIOperation = 'chat', GenAIInputMessages, '') "
        f"FROM spans FINAL WHERE {chosen} ORDER BY Timestamp, SpanId LIMIT {int(limit)}",
        values,
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
