"""A conversation's turns (one trace each) in order, each with its path through agents and
tools, its alerts and its scores."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from pathgrade.batch_plane.store import conversations
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
    """The turns of `conversation_id` the viewer may see, oldest first."""
    turns: dict[tuple[str, str], Turn] = {}
    steps: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for span in conversations.spans(store, viewer, conversation_id, MAX_TURNS * 200):
        key = (span.tenant, span.trace_id)
        if not span.parent_span_id and key not in turns:
            turns[key] = Turn(*key, span.start_ns, span.duration_ns, span.name, "")
        if span.chat_input and key in turns and not turns[key].user_text:
            turns[key].user_text = _user_text(span.chat_input)
        if span.operation == "invoke_agent" and span.agent:
            steps[key].append(("agent", span.agent))
        elif span.operation == "execute_tool" and span.tool:
            steps[key].append(("tool", span.tool))
        if span.error and key in turns:
            turns[key].errors += 1
    for key, turn in turns.items():
        turn.path = steps[key]
    for tenant, trace_id, code, severity, reason in conversations.alerts(
        store, viewer, conversation_id
    ):
        if (tenant, trace_id) in turns:
            turns[(tenant, trace_id)].alerts.append((code, severity, reason))
    for tenant, trace_id, metric, value, label in conversations.scores(
        store, viewer, conversation_id
    ):
        if (tenant, trace_id) in turns:
            turns[(tenant, trace_id)].scores.append((metric, value, label))
    return sorted(turns.values(), key=lambda t: (t.start_ns, t.trace_id))[:MAX_TURNS]


def _user_text(input_messages: str) -> str:
    """The last user message of a chat's input (captured messages only)."""
    said = [m["text"] for m in messages(input_messages) if m["role"] == "user" and m["text"]]
    return str(said[-1]) if said else ""
