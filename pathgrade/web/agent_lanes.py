"""The agents of one turn as lanes on the trace page: one lane per agent, a bar per run of
it on the trace's time axis, and each hand-off between them (`content.handoffs`) as a
connector from the sender's lane to the receiver's at the moment the receiver starts."""

from __future__ import annotations

from dataclasses import dataclass

from pathgrade.content.handoffs import HandoffFlow, HandoffKind, handoff_flow
from pathgrade.schemas.model import Trace


@dataclass(frozen=True)
class LaneRun:
    """One run of an agent: its lane, its span, and its bar on the axis (percent)."""

    lane: int
    span_id: str
    offset_pct: float
    width_pct: float


@dataclass(frozen=True)
class LaneHandoff:
    """One hand-off drawn between two lanes, at `at_pct` along the axis."""

    sender: str
    receiver: str
    kind: HandoffKind
    from_lane: int
    to_lane: int
    at_pct: float
    span_id: str  # the span that shows it (the handoff span, else the receiver's run)
    carried_by: str  # the hand-off tool call that carried it ("": the trace shows none)

    @property
    def top_lane(self) -> int:
        return min(self.from_lane, self.to_lane)

    @property
    def lanes_spanned(self) -> int:
        return abs(self.to_lane - self.from_lane)


@dataclass(frozen=True)
class TurnLanes:
    """A turn of two or more agents: its agents (lane order), their runs, the hand-offs,
    and the agents control passed through (`HandoffFlow.agent_path`)."""

    top_span_id: str
    agents: list[str]
    runs: list[LaneRun]
    handoffs: list[LaneHandoff]
    path: list[str]


def turn_lanes(turn: Trace, start_ns: int, duration_ns: int) -> TurnLanes | None:
    """The lanes of one turn on the axis of a trace starting at `start_ns` and lasting
    `duration_ns`; None when fewer than two agents ran in it."""
    flow: HandoffFlow = handoff_flow(turn)
    agents = flow.agents
    if len(agents) < 2:
        return None
    lane = {agent: n for n, agent in enumerate(agents)}
    total = max(duration_ns, 1)

    def pct(ns: int) -> float:
        return 100.0 * (ns - start_ns) / total

    runs = [
        LaneRun(
            lane[run.agent],
            run.span.span_id,
            pct(run.start_ns),
            100.0 * (run.end_ns - run.start_ns) / total,
        )
        for run in flow.runs
    ]
    handoffs = []
    for handoff in flow.handoffs:
        sender, receiver = flow.sender(handoff), flow.receiver(handoff)
        call = handoff.call
        handoffs.append(
            LaneHandoff(
                sender=sender.agent,
                receiver=receiver.agent,
                kind=handoff.kind,
                from_lane=lane[sender.agent],
                to_lane=lane[receiver.agent],
                at_pct=pct(receiver.start_ns),
                span_id=handoff.span.span_id,
                carried_by=(call.genai.tool_name or call.name) if call is not None else "",
            )
        )
    top = turn.root
    return TurnLanes(top.span_id if top else "", agents, runs, handoffs, flow.agent_path())
