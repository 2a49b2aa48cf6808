"""A conversation's turns (one trace each) in order, each with its path through agents and
tools, its alerts and its scores."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from pathgrade.web.store_reads import ReadStore
from pathgrade.web.trace_view import messages
from pathgrade.web.viewers import Viewer

MAX_TURNS = 500


@dataclass
class Turn:
    tenant: str
    trace_id: str
    start_ns: int
    duration_ns: int
    name: str
    user_text: str
    path: list[tuple[str, str]] = field(default_factory=list)  # ("agent"|"tool", name)
    errors: int = 0
    alerts: list[tuple[str, str, str]] = field(default_factory=list)  # code, severity, reason
    scores: list[tuple[str, float | None, str]] = field(default_factory=list)


def load_conversation(store: ReadStore, viewer: Viewer, conversation_id: str) -> list[Turn]:
    """The turns of `conversation_id` the viewer may see, oldest first (GLOBAL IN: on a
    sharded store a conversation's traces live on several shards)."""
    chosen = (
        "(Tenant, TraceId) GLOBAL IN (SELECT Tenant, TraceId FROM spans "
        f"WHERE {viewer.where('Tenant')} AND GenAIConversationId = {{conversation:String}})"
    )
    values = {"conversation": conversation_id, **viewer.parameters}
    turns: dict[tuple[str, str], Turn] = {}
    steps: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for (
        tenant,
        trace_id,
        start,
        duration,
        name,
        parent,
        operation,
        agent,
        tool,
        error,
        text,
    ) in store.rows(
        "SELECT Tenant, TraceId, toUnixTimestamp64Nano(Timestamp), Duration, SpanName, "
        "ParentSpanId, GenAIOperation, GenAIAgentName, GenAIToolName, "
        "StatusCode = 'Error' OR GenAIErrorType != '', "
        "if(GenAIOperation = 'chat', GenAIInputMessages, '') "
        f"FROM spans FINAL WHERE {chosen} ORDER BY Timestamp, SpanId "
        f"LIMIT {MAX_TURNS * 200}",
        values,
    ):
        key = (tenant, trace_id)
        if not parent and key not in turns:
            turns[key] = Turn(tenant, trace_id, start, duration, name, "")
        if text and key in turns and not turns[key].user_text:
            turns[key].user_text = _user_text(text)
        if operation == "invoke_agent" and agent:
            steps[key].append(("agent", agent))
        elif operation == "execute_tool" and tool:
            steps[key].append(("tool", tool))
        if error and key in turns:
            turns[key].errors += 1
    for key, turn in turns.items():
        turn.path = steps[key]
    for tenant, trace_id, code, severity, reason in store.rows(
        f"SELECT Tenant, TraceId, Code, Severity, Reason FROM alerts FINAL WHERE {chosen} "
        "ORDER BY Code",
        values,
    ):
        if (tenant, trace_id) in turns:
            turns[(tenant, trace_id)].alerts.append((code, severity, reason))
    for tenant, trace_id, metric, value, label in store.rows(
        f"SELECT Tenant, TraceId, Metric, Value, Label FROM scores FINAL WHERE {chosen} "
        "ORDER BY Metric",
        values,
    ):
        if (tenant, trace_id) in turns:
            turns[(tenant, trace_id)].scores.append((metric, value, label))
    return sorted(turns.values(), key=lambda t: (t.start_ns, t.trace_id))[:MAX_TURNS]


def _user_text(input_messages: str) -> str:
    """The last user message of a chat's input (captured messages only)."""
    said = [m["text"] for m in messages(input_messages) if m["role"] == "user" and m["text"]]
    return str(said[-1]) if said else ""
