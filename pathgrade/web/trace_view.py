"""One trace as the trace page shows it: its agent turns (`content.agent_turns`: each
turn's top span, and the findings raised on it), the agents of each multi-agent turn as
lanes with the hand-offs between them (`web.agent_lanes`), a waterfall of its spans on one
time axis and, per span, everything stored about it (attributes, events and log records,
links, the tool call, messages, tokens and cost, what the collector recorded instead of
redacted content), the detector findings pinned to it and the scores of it.

`waterfall` is pure: spans in, rows with their depth and their bar's offset and width (in
percent of the trace's span of time) out. `load_trace_view` reads one trace of the viewer's
tenant from the store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pathgrade.batch_plane.store import alerts as stored_alerts
from pathgrade.batch_plane.store import scores as stored_scores
from pathgrade.batch_plane.store.alerts import TraceAlert
from pathgrade.batch_plane.store.scores import TraceScore
from pathgrade.batch_plane.store.trace_rows import load_trace
from pathgrade.content.agent_turns import turns_of
from pathgrade.detectors.prices import PriceTable, cost_usd
from pathgrade.detectors.registry import REGISTRY
from pathgrade.schemas.genai import PG_REDACTED_KEYS
from pathgrade.schemas.model import LogRecord, Span, Trace
from pathgrade.web.agent_lanes import TurnLanes, turn_lanes
from pathgrade.web.store_reads import ReadStore

TRACE_ID = re.compile(r"[0-9a-f]{32}")
PATHGRADE_PREFIX = "pathgrade."
AXIS_TICKS = 5


class Finding(TraceAlert):
    """A stored alert of the trace, pinned to a span, with its detector's documentation."""

    __slots__ = ()

    @property
    def doc(self) -> str:
        """The detector's documentation paragraph ("" for a code this build lacks)."""
        rule = REGISTRY.get(self.code)
        return rule.doc.summary if rule is not None else ""

    @property
    def spans(self) -> list[str]:
        """The spans it is about: its own, and those a cannot-decide finding names."""
        named = self.details.get("span_ids") or []
        return [self.span_id, *[s for s in named if isinstance(s, str) and s != self.span_id]]


@dataclass
class WaterfallRow:
    """One span's line of the waterfall: its depth in the tree and its bar."""

    span: Span
    depth: int
    offset_pct: float
    width_pct: float
    has_children: bool


@dataclass
class SpanDetail:
    """Everything the attribute panel shows about one span."""

    span: Span
    offset_ns: int
    cost_usd: float | None
    facts: list[tuple[str, Any]]
    attributes: list[tuple[str, Any]]
    tool_arguments: Any
    tool_result: Any
    input_messages: list[dict[str, Any]]
    output_messages: list[dict[str, Any]]
    redacted_keys: int
    records: list[RecordView] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    scores: list[TraceScore] = field(default_factory=list)


@dataclass(frozen=True)
class TurnRow:
    """One agent turn of the trace: its top span and the findings raised on it."""

    top: Span
    spans: int
    findings: int


@dataclass
class TraceView:
    trace: Trace
    rows: list[WaterfallRow]
    details: dict[str, SpanDetail]
    ticks: list[tuple[float, int]]  # (percent along the axis, ns from the trace's start)
    start_ns: int
    duration_ns: int
    findings: list[Finding]
    scores: list[TraceScore]
    conversation: str
    dataset_item: str
    run_id: str
    cost_usd: float | None
    turns: list[TurnRow] = field(default_factory=list)
    lanes: list[TurnLanes] = field(default_factory=list)  # turns of two or more agents

    def turn_number(self, top_span_id: str) -> int:
        """The number of the turn `top_span_id` tops, as the page's turn list numbers it
        (0: no listed turn)."""
        return next((n for n, t in enumerate(self.turns, 1) if t.top.span_id == top_span_id), 0)

    @property
    def flagged(self) -> set[str]:
        """Span ids a finding is pinned to."""
        return {span for finding in self.findings for span in finding.spans}


def waterfall(spans: Sequence[Span]) -> tuple[list[WaterfallRow], int, int]:
    """Spans in tree order (children under their parent, by start) with their bars on the
    trace's time axis; (rows, trace start ns, trace duration ns). A span whose parent is not
    stored starts its own subtree."""
    if not spans:
        return [], 0, 0
    start = min(s.start_ns for s in spans)
    end = max(max(s.end_ns, s.start_ns) for s in spans)
    total = max(end - start, 1)
    ids = {s.span_id for s in spans}
    children: dict[str, list[Span]] = {}
    roots: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start_ns, s.span_id)):
        if span.parent_span_id and span.parent_span_id in ids:
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append(span)
    rows: list[WaterfallRow] = []
    stack = [(0, span) for span in reversed(roots)]
    while stack:
        depth, span = stack.pop()
        rows.append(
            WaterfallRow(
                span=span,
                depth=depth,
                offset_pct=100.0 * (span.start_ns - start) / total,
                width_pct=100.0 * span.duration_ns / total,
                has_children=span.span_id in children,
            )
        )
        stack.extend((depth + 1, child) for child in reversed(children.get(span.span_id, [])))
    return rows, start, end - start


def axis_ticks(duration_ns: int, count: int = AXIS_TICKS) -> list[tuple[float, int]]:
    """Evenly spaced ticks of the time axis: (percent, ns from the start)."""
    return [(100.0 * i / count, duration_ns * i // count) for i in range(count + 1)]


def parsed_json(text: str) -> Any:
    """JSON text as a value; the text itself when it is not JSON; None when empty."""
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def messages(text: str) -> list[dict[str, Any]]:
    """GenAI messages JSON as [{"role", "text", "calls"}] (text parts joined, tool calls and
    tool responses written out); [] when not captured."""
    value = parsed_json(text)
    if not isinstance(value, list):
        return [{"role": "", "text": value, "calls": []}] if value else []
    shown = []
    for message in value:
        if not isinstance(message, dict):
            continue
        parts = message.get("parts") or []
        texts = [str(p.get("content", "")) for p in parts if isinstance(p, dict)
                 and p.get("type") == "text"]  # fmt: skip
        if isinstance(message.get("content"), str):
            texts.append(message["content"])
        calls = [
            f"{p.get('name', '?')}({json.dumps(p.get('arguments', {}))})"
            if p.get("type") == "tool_call"
            else f"-> {json.dumps(p.get('response'))}"
            for p in parts
            if isinstance(p, dict) and p.get("type") in ("tool_call", "tool_call_response")
        ]
        shown.append({"role": message.get("role", ""), "text": "\n".join(texts), "calls": calls})
    return shown


def span_cost(span: Span, prices: PriceTable) -> float | None:
    """List-price cost of the span's tokens (None without tokens or an unpriced model)."""
    g = span.genai
    if not (g.input_tokens or g.output_tokens):
        return None
    model = g.response_model or g.request_model
    return cost_usd(model, g.provider_name, g.input_tokens or 0, g.output_tokens or 0, prices)


@dataclass(frozen=True)
class RecordView:
    """One log record tied to a span, as the attribute panel shows it beside the span's
    events: when, its event name, severity, `pathgrade.*` facts apart from its other
    attributes, and its body while the store keeps it."""

    time_ns: int
    event_name: str
    severity: str
    facts: list[tuple[str, Any]]
    attributes: list[tuple[str, Any]]
    body: str


def record_view(record: LogRecord) -> RecordView:
    """`record` as the attribute panel shows it."""
    items = sorted(record.attributes.items())
    return RecordView(
        record.at_ns, record.event_name or "(no event name)", record.severity_text,
        [(k, v) for k, v in items if k.startswith(PATHGRADE_PREFIX)],
        [(k, v) for k, v in items if not k.startswith(PATHGRADE_PREFIX)],
        "" if record.body is None else str(record.body),
    )  # fmt: skip


def span_detail(span: Span, trace_start_ns: int, prices: PriceTable) -> SpanDetail:
    """The attribute panel of `span`: `pathgrade.*` facts apart from other attributes, its
    records beside its events."""
    items = sorted(span.attributes.items())
    redacted = span.attributes.get(PG_REDACTED_KEYS)
    return SpanDetail(
        span=span,
        offset_ns=span.start_ns - trace_start_ns,
        cost_usd=span_cost(span, prices),
        facts=[(k, v) for k, v in items if k.startswith(PATHGRADE_PREFIX)],
        attributes=[(k, v) for k, v in items if not k.startswith(PATHGRADE_PREFIX)],
        tool_arguments=parsed_json(span.genai.tool_arguments),
        tool_result=parsed_json(span.genai.tool_result),
        input_messages=messages(span.genai.input_messages),
        output_messages=messages(span.genai.output_messages),
        redacted_keys=int(redacted) if str(redacted or "").isdigit() else 0,
        records=[record_view(r) for r in span.records],
    )


def load_trace_view(
    store: ReadStore, tenant: str, trace_id: str, prices: PriceTable
) -> TraceView | None:
    """The trace page of `tenant`'s trace `trace_id` (None when none of its spans is
    stored). `tenant` must be one the viewer may see (`batch_plane.store.traces.tenants_of`)."""
    trace = load_trace(store, tenant, trace_id)
    if trace is None:
        return None
    rows, start, duration = waterfall(trace.spans)
    root = rows[0].span if rows else None
    trace_level = root.span_id if root else ""  # where a finding of no span is pinned
    findings = [
        Finding(*alert._replace(span_id=alert.span_id or trace_level))
        for alert in stored_alerts.of_trace(store, tenant, trace_id)
    ]
    agent_turns = turns_of(trace)
    turns = [
        TurnRow(turn.root, len(turn.spans),
                sum(f.turn_span_id == turn.top_span_id for f in findings))
        for turn in agent_turns
        if turn.root is not None
    ]  # fmt: skip
    lanes = [
        shown for turn in agent_turns if (shown := turn_lanes(turn, start, duration)) is not None
    ]
    scores = stored_scores.of_trace(store, tenant, trace_id)
    details = {row.span.span_id: span_detail(row.span, start, prices) for row in rows}
    for finding in findings:
        for span_id in finding.spans:
            if span_id in details:
                details[span_id].findings.append(finding)
    for score in scores:
        target = score.span_id if score.span_id in details else root and root.span_id
        if target:
            details[target].scores.append(score)
    costs = [d.cost_usd for d in details.values() if d.cost_usd is not None]
    return TraceView(
        trace=trace,
        rows=rows,
        details=details,
        ticks=axis_ticks(duration),
        start_ns=start,
        duration_ns=duration,
        findings=findings,
        scores=scores,
        conversation=next(
            (s.genai.conversation_id for s in trace.spans if s.genai.conversation_id), ""
        ),
        dataset_item=next(
            (s.eval.dataset_item_id for s in trace.spans if s.eval.dataset_item_id), ""
        ),
        run_id=next((s.eval.run_id for s in trace.spans if s.eval.run_id), ""),
        cost_usd=sum(costs) if costs else None,
        turns=turns,
        lanes=lanes,
    )
