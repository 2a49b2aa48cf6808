"""The agent turns of a trace: the unit pathgrade grades (DESIGN.md, "Grade the traffic
teams send").

A turn's top span is the outermost agent span of a service (`conventions.is_agent_entry`:
invoke_agent, invoke_workflow, handle_conversation_turn, OpenInference AGENT, a LangGraph
graph root), when the trace holds any; in a trace with no agent span, an entry span: one
whose parent is remote (OTLP span flags), absent from the trace or none (the root),
outermost per service (spans hanging from one missing span are one turn, topped by the
earliest, until that span comes), and a turn only when a GenAI operation (a model, tool or
agent call) is among its spans: a service's other traces (`GET /health`) are no turn. A
turn holds its top's subtree less the subtrees of turns nested in it (another service's
agent, called over the network); the spans above its top (an HTTP server span, middleware,
a session's span) are its context, nearest first. In a trace with agents, a span under no
agent (a server's middleware beside the agent) belongs to no turn; spans hanging from a
missing local span (flags say it is not remote) inside the time of an agent turn's top of
their service are that turn's (an instrumentor's spans under a framework span that is
never exported).

`turn_layout` reads whatever has arrived of a trace: the realtime plane's assembler calls
it as spans come and decides when each turn is due (`realtime_plane.assembler`); offline
scoring reads whole traces (`turns_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pathgrade.content.conventions import is_agent_entry
from pathgrade.schemas.model import Span, Trace


@dataclass(frozen=True, slots=True)
class TurnShape:
    """One turn of a layout: its top span, its own spans (the top among them), the spans
    enclosing it (nearest first; the first `own_context` enclose no other turn) and its
    boundary: the outermost span that has arrived at or above its top."""

    top: Span
    spans: list[Span]
    context: list[Span]
    own_context: int
    boundary: Span

    def trace(self) -> Trace:
        """The turn as the detectors read it."""
        top = self.top
        return Trace(
            top.tenant, top.trace_id, list(self.spans), list(self.context), top.span_id,
            self.own_context,
        )  # fmt: skip

    @property
    def size(self) -> int:
        """Spans it is read from (its own and its context): it changes when one arrives."""
        return len(self.spans) + len(self.context)


@dataclass(frozen=True, slots=True)
class TurnLayout:
    """The turns among a trace's spans, in their tops' start order (`agents`: their tops
    are agent spans, not entry spans); and, in a trace with agents, its loose GenAI spans
    (a model or tool call under no agent span and in no turn's context), grouped by the
    span they hang from (the missing parent of their boundary), each group with one of its
    boundaries: pieces of a turn whose top may still come."""

    turns: list[TurnShape]
    agents: bool
    loose: dict[str, tuple[Span, list[Span]]]  # hung from -> (a boundary, spans)
    spans: int  # how many spans it was found from


def turn_layout(spans: Sequence[Span]) -> TurnLayout:
    """The turns of what has arrived of one trace (`spans`, of one tenant)."""
    by_id = {span.span_id: span for span in spans}
    parents = {
        span.span_id: by_id.get(span.parent_span_id) if span.parent_span_id else None
        for span in spans
    }
    agents = {s.span_id for s in spans if is_agent_entry(s.name, s.genai.operation, s.attributes)}
    candidates = agents or {
        s.span_id for s in spans if parents[s.span_id] is None or s.parent_is_remote
    }
    tops = [s for s in spans if s.span_id in candidates and not _nested(s, candidates, parents)]
    members = _members(spans, parents, {top.span_id for top in tops})
    if not agents:  # spans hanging from one missing span are one turn until it comes
        for joined, first in _joined_orphans(tops).items():
            members[first] += members.pop(joined)
        tops = [top for top in tops if any(s.genai.operation for s in members.get(top.span_id, ()))]
    contexts = {top.span_id: _ancestors(top, parents) for top in tops}
    enclosing: dict[str, int] = {}  # span id -> how many turns it encloses
    for context in contexts.values():
        for span in context:
            enclosing[span.span_id] = enclosing.get(span.span_id, 0) + 1
    loose: dict[str, tuple[Span, list[Span]]] = {}
    every_span_placed = len(by_id) == len(spans) == sum(map(len, members.values()))
    if agents and not every_span_placed:  # (most traces place every span in a turn)
        placed = {span.span_id for turn in members.values() for span in turn} | enclosing.keys()
        for span in spans:
            if span.span_id in placed:
                continue
            boundary = (_ancestors(span, parents) or [span])[-1]
            adopter = _adopter(boundary, tops)
            if adopter is not None:
                members[adopter.span_id].append(span)
            elif span.genai.operation:
                hung_from = boundary.parent_span_id or boundary.span_id
                loose.setdefault(hung_from, (boundary, []))[1].append(span)
    turns = []
    for top in sorted(tops, key=lambda s: (s.start_ns, s.span_id)):
        context = contexts[top.span_id]
        own = next((i for i, s in enumerate(context) if enclosing[s.span_id] > 1), len(context))
        boundary = context[-1] if context else top
        turns.append(TurnShape(top, members[top.span_id], context, own, boundary))
    return TurnLayout(turns, bool(agents), loose, len(spans))


def loose_turn(spans: list[Span]) -> TurnShape:
    """Loose spans graded as a turn of their own (their agent span never came): its top
    is the earliest of them."""
    top = min(spans, key=lambda s: (s.start_ns, s.span_id))
    return TurnShape(top, spans, [], 0, top)


def turns_of(trace: Trace) -> list[Trace]:
    """The turns of a whole trace (offline: every span is there), in start order."""
    return [shape.trace() for shape in turn_layout(trace.spans).turns]


def only_turn(trace: Trace) -> Trace:
    """A whole trace's only turn (an offline attempt's agent run, with the spans an
    adapter's server put around it as its context); the whole trace when it holds several
    turns or none."""
    turns = turns_of(trace)
    return turns[0] if len(turns) == 1 else trace


def turn_at(trace: Trace, top_span_id: str) -> Trace:
    """The turn of a whole trace whose top span is `top_span_id`; the whole trace when
    `top_span_id` is "" or tops no turn of it."""
    if top_span_id:
        for shape in turn_layout(trace.spans).turns:
            if shape.top.span_id == top_span_id:
                return shape.trace()
    return trace


def _adopter(boundary: Span, tops: list[Span]) -> Span | None:
    """The agent turn whose spans hang from a missing local span (`boundary`: their
    outermost arrived span) are part of: the innermost top of their service that ran
    around them (an instrumentor's spans under a framework span never exported, AutoGen
    under OpenInference); None when they hang from no missing span or no top ran around
    them."""
    if not boundary.parent_span_id or boundary.parent_is_remote:
        return None
    around = [
        top
        for top in tops
        if top.service_name == boundary.service_name
        and top.start_ns <= boundary.start_ns
        and boundary.end_ns <= top.end_ns
    ]
    return max(around, key=lambda top: (top.start_ns, top.span_id), default=None)


def _joined_orphans(tops: list[Span]) -> dict[str, str]:
    """Entry tops hanging from the same missing parent (not a remote one) as an earlier
    top, each mapped to that earliest one."""
    earliest: dict[str, str] = {}
    joined = {}
    for top in sorted(tops, key=lambda s: (s.start_ns, s.span_id)):
        if top.parent_span_id and not top.parent_is_remote:
            first = earliest.setdefault(top.parent_span_id, top.span_id)
            if first != top.span_id:
                joined[top.span_id] = first
    return joined


def _nested(span: Span, candidates: set[str], parents: dict[str, Span | None]) -> bool:
    """Whether a candidate top of `span`'s service encloses it."""
    seen = {span.span_id}
    current = parents[span.span_id]
    while current is not None and current.span_id not in seen:
        if current.span_id in candidates and current.service_name == span.service_name:
            return True
        seen.add(current.span_id)
        current = parents[current.span_id]
    return False


def _ancestors(span: Span, parents: dict[str, Span | None]) -> list[Span]:
    """The spans above `span`, nearest first (a parent cycle ends the walk)."""
    seen = {span.span_id}
    out = []
    current = parents[span.span_id]
    while current is not None and current.span_id not in seen:
        out.append(current)
        seen.add(current.span_id)
        current = parents[current.span_id]
    return out


def _members(
    spans: Sequence[Span], parents: dict[str, Span | None], top_ids: set[str]
) -> dict[str, list[Span]]:
    """Per top span id, the spans of its turn: its subtree, less the subtrees of the tops
    below it (each span is visited once)."""
    children: dict[str, list[Span]] = {}
    for span in spans:
        parent = parents[span.span_id]
        if parent is not None and span.span_id not in top_ids:
            children.setdefault(parent.span_id, []).append(span)
    members: dict[str, list[Span]] = {}
    for span in spans:
        if span.span_id not in top_ids:
            continue
        found, stack = [], [span]
        while stack:
            current = stack.pop()
            found.append(current)
            stack += children.pop(current.span_id, ())
        members[span.span_id] = found
    return members
