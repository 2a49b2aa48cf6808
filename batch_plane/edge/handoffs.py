"""The hand-offs between agents that an EDGE run's (or live traffic's) turns show, counted
for the graph views: who handed to whom, how (`transfer`: control passed; `delegation`: a
sub-agent call, the receiver's run nested in the sender's), and in how many turns.

Read with `content.handoffs.handoff_flow`, the same reading as the trace page's agent lanes
and the hand-off detectors. Agent names and counts only: no content.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pathgrade.content.handoffs import HandoffKind, handoff_flow
from pathgrade.schemas.model import Trace

HandoffEdge = tuple[str, str, HandoffKind]
"""(sender agent, receiver agent, kind)."""


def turn_handoffs(trace: Trace) -> list[HandoffEdge]:
    """The hand-offs of one turn between different agents, in the order their receivers
    start (a hand-off repeated in the turn is listed each time)."""
    flow = handoff_flow(trace)
    edges = [(flow.sender(h).agent, flow.receiver(h).agent, h.kind) for h in flow.handoffs]
    return [edge for edge in edges if edge[0] != edge[1]]


def handoff_counts(turns: Iterable[Sequence[HandoffEdge]]) -> list[dict[str, Any]]:
    """Per (from, to, kind): `handoffs` (how often) and `turns` (in how many turns), in
    first-seen order."""
    seen: Counter[HandoffEdge] = Counter()
    in_turns: Counter[HandoffEdge] = Counter()
    for edges in turns:
        seen.update(edges)
        in_turns.update(set(edges))
    return [
        {"from": edge[0], "to": edge[1], "kind": edge[2], "handoffs": n, "turns": in_turns[edge]}
        for edge, n in seen.items()
    ]
