"""Hand-offs between agents within one turn: which agents ran, in what order, and each
hand-off from one agent to another, with the call that carried it where the trace shows
one (its argument fingerprints, on default settings).

Agent runs, whatever convention wrote them:

- a named agent span (`conventions.is_agent_entry` with an agent name: GenAI
  `invoke_agent` with `gen_ai.agent.name`, an OpenInference `AGENT` span with
  `agent.name`, an OpenLLMetry workflow or agent span): a run of that agent. An agent span
  nested in a run of the same agent belongs to that run (a framework's wrapper span);
- a top-level LangGraph node visit (`graph_walk.langgraph_node`: one in no other node
  visit) whose subtree holds a model call: a run of the agent the node is named after,
  also inside the graph's own agent span (OpenLLMetry's `invoke_agent <graph>`). A node
  visit without a model call (a tools node, a router) is the work of the latest node run
  beside it before it.

Each span of the turn belongs to the run of its nearest enclosing run span (its owner);
a span under no run (the turn's top when it names no agent, a router before any agent)
belongs to none.

Hand-offs, in the order the receiving runs start:

- `transfer` (control passes): an OpenInference handoff span (`handoff to billing`,
  `conventions.handoff_tool_names`) hands from the agent whose run holds it to the next
  run of the agent it names; else a run follows an earlier run of another agent at the
  same level (siblings under the same enclosing run, or both at the top: LangGraph nodes,
  sequential sub-agents);
- `delegation` (the caller keeps control): a run nested in a run of another agent (a
  sub-agent called by an agent). Its return to the caller is not a hand-off. A node run
  is never a delegation from the graph around it: the graph's first node is where the
  turn starts.

A run that follows a run of the same agent (a LangGraph agent node visited again after its
tools node) is no hand-off. What a hand-off carried: the sender's `execute_tool` call of
the hand-off tool (`transfer_to_<receiver>`), else the handoff span itself when it is a
tool span; the identity and conversation each run's spans carry are read from the runs
(`AgentRun.spans`) by the detectors, which know the policy's identity attribute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pathgrade.content.conventions import any_handoff_span, handoff_tool_names, is_agent_entry
from pathgrade.content.graph_walk import langgraph_node, langgraph_nodes
from pathgrade.schemas import genai
from pathgrade.schemas.model import Span, Trace

HandoffKind = Literal["transfer", "delegation"]


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One stretch of one agent in a turn: its agent (or node) span, the spans it owns
    (its own span first, then in start order), the run enclosing it (index), if any, and
    whether it is a LangGraph node visit."""

    agent: str
    span: Span
    spans: tuple[Span, ...]
    parent: int | None
    node: bool = False  # a LangGraph node visit

    @property
    def start_ns(self) -> int:
        return self.span.start_ns

    @property
    def end_ns(self) -> int:
        return max((s.end_ns for s in self.spans), default=self.span.end_ns)


@dataclass(frozen=True, slots=True)
class Handoff:
    """One hand-off: from the run `sender` to the run `receiver` (indexes into
    `HandoffFlow.runs`), the span that shows it (the handoff span, else the receiver's run
    span) and the call that carried it (a hand-off tool call, None when the trace shows
    none)."""

    sender: int
    receiver: int
    kind: HandoffKind
    span: Span
    call: Span | None = None


@dataclass(frozen=True, slots=True)
class HandoffFlow:
    """The agents of one turn: their runs in start order, the hand-offs between them in the
    order their receivers start, and which run owns each span."""

    runs: tuple[AgentRun, ...] = ()
    handoffs: tuple[Handoff, ...] = ()
    owners: dict[str, int] = field(default_factory=dict)  # span id -> run index

    @property
    def agents(self) -> list[str]:
        """The agents of the turn in the order they first ran (the trace page's lanes)."""
        return list(dict.fromkeys(run.agent for run in self.runs))

    def agent_of(self, span: Span) -> str:
        """The agent whose run owns `span`; "" when no run does."""
        index = self.owners.get(span.span_id)
        return self.runs[index].agent if index is not None else ""

    def sender(self, handoff: Handoff) -> AgentRun:
        return self.runs[handoff.sender]

    def receiver(self, handoff: Handoff) -> AgentRun:
        return self.runs[handoff.receiver]

    def agent_path(self) -> list[str]:
        """The agents control passed through, in order: the first run's agent, then each
        hand-off's receiver (a delegation's caller is not repeated on return)."""
        if not self.handoffs:
            return [self.runs[0].agent] if self.runs else []
        return [self.sender(self.handoffs[0]).agent] + [
            self.receiver(h).agent for h in self.handoffs
        ]


NO_HANDOFFS = HandoffFlow()


def handoff_flow(trace: Trace, nodes: dict[str, str] | None = None) -> HandoffFlow:
    """The agent runs and hand-offs of one turn (or of a whole trace read as one).
    `nodes`: the trace's `langgraph_nodes` when the caller has them already."""
    spans = trace.spans
    by_id = {span.span_id: span for span in spans}
    if nodes is None:
        nodes = langgraph_nodes(spans)
    if nodes or any_handoff_span(span.name for span in spans):
        return _flow(spans, by_id)
    named = [  # with no LangGraph node or handoff span, the only spans that may start a run
        s
        for s in spans
        if s.genai.agent_name and is_agent_entry(s.name, s.genai.operation, s.attributes)
    ]
    if len(named) < 2 and len(by_id) == len(spans):
        return _one_run(named[0], spans, by_id) if named else NO_HANDOFFS
    return _flow(spans, by_id)


def _one_run(agent: Span, spans: list[Span], by_id: dict[str, Span]) -> HandoffFlow:
    """The flow of a turn whose only possible run is the named agent span `agent` (no
    other agent span, LangGraph node or handoff span, span ids unique): that run, its
    span and every span below it, and no hand-off (most turns: one agent); no run when a
    parent cycle keeps `agent` out of the walk (`_preorder`). `_flow` finds the same."""
    seen, current = {agent.span_id}, agent
    while current.parent_span_id in by_id and current.parent_span_id != current.span_id:
        if current.parent_span_id in seen:
            return NO_HANDOFFS  # a span in (or below) a parent cycle is in no run
        current = by_id[current.parent_span_id]
        seen.add(current.span_id)
    children: dict[str, list[str]] = {}
    for span in spans:
        if span.parent_span_id != span.span_id:
            children.setdefault(span.parent_span_id, []).append(span.span_id)
    below, stack = set(), [agent.span_id]
    while stack:
        span_id = stack.pop()
        below.add(span_id)
        stack += children.get(span_id, ())
    owned = [s for s in spans if s.span_id in below and s is not agent]  # start order
    parent = 0 if agent.parent_span_id == agent.span_id else None  # as `_flow` reads it
    run = AgentRun(agent.genai.agent_name, agent, (agent, *owned), parent)
    return HandoffFlow((run,), (), dict.fromkeys(below, 0))


def _flow(spans: list[Span], by_id: dict[str, Span]) -> HandoffFlow:
    """`handoff_flow` of any turn (see the module doc)."""
    order = _preorder(spans, by_id)
    below_model = _below_model_calls(order, by_id)
    holders: dict[str, str] = {}  # span id -> its run's span id
    agents: dict[str, str] = {}  # run span id -> agent
    visits: dict[str, str] = {}  # span id -> its top-level LangGraph node visit's span id
    above: dict[str, str] = {}  # span id -> agent of the nearest named agent span at or above
    nodes: set[str] = set()  # the runs that are LangGraph node visits
    for span in order:
        parent = span.parent_span_id if span.parent_span_id in by_id else ""
        agent, holder, visit = above.get(parent, ""), holders.get(parent), visits.get(parent)
        name = span.genai.agent_name
        if name and is_agent_entry(span.name, span.genai.operation, span.attributes):
            if name != agent:
                holder, agents[span.span_id] = span.span_id, name
            agent = name
        elif visit is None and (node := langgraph_node(span)):
            visit = span.span_id
            if span.span_id in below_model:
                holder, agent, agents[span.span_id] = span.span_id, node, node
                nodes.add(span.span_id)
        above[span.span_id] = agent
        if holder is not None:
            holders[span.span_id] = holder
        if visit is not None:
            visits[span.span_id] = visit
    if not agents:
        return NO_HANDOFFS
    _assign_tool_nodes(order, by_id, holders, nodes, visits)
    ordered = sorted(agents, key=lambda i: (by_id[i].start_ns, i))
    index = {span_id: n for n, span_id in enumerate(ordered)}
    owned: dict[str, list[Span]] = {span_id: [] for span_id in ordered}
    for span in spans:  # start order
        holder = holders.get(span.span_id)
        if holder is not None and holder != span.span_id:
            owned[holder].append(span)
    runs = []
    for span_id in ordered:
        span = by_id[span_id]
        parent_holder = holders.get(span.parent_span_id)
        parent = index[parent_holder] if parent_holder is not None else None
        runs.append(
            AgentRun(agents[span_id], span, (span, *owned[span_id]), parent, span_id in nodes)
        )
    owners = {span_id: index[holder] for span_id, holder in holders.items()}
    return HandoffFlow(tuple(runs), tuple(_handoffs(tuple(runs), owners)), owners)


def _preorder(spans: list[Span], by_id: dict[str, Span]) -> list[Span]:
    """Every span once, parents before their children (roots: spans whose parent is not
    among `spans`), siblings in start order; a span in a parent cycle is left out."""
    children: dict[str, list[Span]] = {}
    roots = []
    for span in spans:  # start order
        if span.parent_span_id in by_id and span.parent_span_id != span.span_id:
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append(span)
    order: list[Span] = []
    stack = list(reversed(roots))
    while stack:
        span = stack.pop()
        order.append(span)
        stack += reversed(children.pop(span.span_id, ()))
    return order


def _below_model_calls(order: list[Span], by_id: dict[str, Span]) -> set[str]:
    """The ids of the spans whose subtree holds a model call (the call itself included)."""
    found: set[str] = set()
    for span in reversed(order):  # children before their parents
        if span.span_id in found or span.genai.operation in genai.MODEL_OPERATIONS:
            found.add(span.span_id)
            if span.parent_span_id in by_id:
                found.add(span.parent_span_id)
    return found


def _assign_tool_nodes(
    order: list[Span],
    by_id: dict[str, Span],
    holders: dict[str, str],
    nodes: set[str],
    visits: dict[str, str],
) -> None:
    """Give the spans of a LangGraph node visit that is no run (a tools node) to the latest
    node run beside it (the same enclosing run) that started before the visit (in place);
    a run inside such a visit keeps its spans."""
    for span in order:
        visit = visits.get(span.span_id)
        if visit is None or visit in nodes:
            continue
        beside = holders.get(by_id[visit].parent_span_id)
        if holders.get(span.span_id) != beside:
            continue  # the span belongs to a run inside the visit
        start = by_id[visit].start_ns
        earlier = [
            by_id[run]
            for run in nodes
            if holders.get(by_id[run].parent_span_id) == beside and by_id[run].start_ns <= start
        ]
        if earlier:
            holders[span.span_id] = max(earlier, key=lambda s: (s.start_ns, s.span_id)).span_id


def _handoffs(runs: tuple[AgentRun, ...], owners: dict[str, int]) -> list[Handoff]:
    """Every hand-off (see the module doc), in the order their receivers start."""
    spans = sorted((s for run in runs for s in run.spans), key=lambda s: (s.start_ns, s.span_id))
    explicit: dict[int, tuple[int, Span]] = {}  # receiver -> (sender, handoff span)
    for span in spans:
        target = _handoff_target(span)
        sender = owners.get(span.span_id)
        if not target or sender is None:
            continue
        receiver = next(
            (
                n
                for n, run in enumerate(runs)
                if run.agent == target and run.start_ns >= span.start_ns and n not in explicit
            ),
            None,
        )
        if receiver is not None:
            explicit[receiver] = (sender, span)
    found = []
    for n, run in enumerate(runs):
        if n in explicit:
            sender, shown = explicit[n]
            kind: HandoffKind = "transfer"
        elif run.parent is not None and runs[run.parent].agent != run.agent and not run.node:
            sender, shown, kind = run.parent, run.span, "delegation"
        else:
            before = [m for m in range(n) if runs[m].parent == run.parent]
            if not before or runs[before[-1]].agent == run.agent:
                continue
            sender, shown, kind = before[-1], run.span, "transfer"
        found.append(Handoff(sender, n, kind, shown, _carrier(runs[sender], run, shown)))
    return found


def _handoff_target(span: Span) -> str:
    """The agent a handoff span (`handoff to <agent>`) names; "" for any other span."""
    if not handoff_tool_names(span.name):
        return ""
    return span.name.split(" to ", 1)[1]


def _carrier(sender: AgentRun, receiver: AgentRun, shown: Span) -> Span | None:
    """The call that carried the hand-off: the sender's latest `execute_tool` call, before
    the receiver started, of a tool the receiver's hand-off answers (`transfer_to_<agent>`),
    else the handoff span when it is a tool span."""
    names = set(handoff_tool_names(f"handoff to {receiver.agent}"))
    calls = [
        s
        for s in sender.spans
        if s.genai.operation == genai.OP_EXECUTE_TOOL
        and (s.genai.tool_name or s.name) in names
        and s.start_ns <= receiver.start_ns
        and s is not shown
    ]
    if calls:
        return max(calls, key=lambda s: (s.start_ns, s.span_id))
    return shown if shown.genai.operation == genai.OP_EXECUTE_TOOL else None
