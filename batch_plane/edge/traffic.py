"""EDGE over production traffic: the walks stored traces show, the graph they imply, and
the utility, adherence and coverage of a declared graph over a time range, without replay.

Pure functions over canonical traces (`schemas.model.Trace`); the walk of one trace comes
from `content.graph_walk.node_visits`, the same reading PG118 does in the realtime plane,
and adherence is PG118's own check (`detectors.graph_adherence.walk_problems`).

The walk of one turn is `batch_plane.edge.walks.turn_walk`: LangGraph nodes, else the
agents a turn transferred control between (its hand-offs the edges), else GenAI
sub-agents. A walk is one run through the graph: `turn` (each trace walks the graph from
its start, as one LangGraph invocation per user turn does) or `conversation` (the turns of
one conversation, `gen_ai.conversation.id`, joined in start order: one node per user turn).
"""

from __future__ import annotations

import datetime
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from pathgrade.batch_plane.edge.determinism import node_utility, structural_adherence
from pathgrade.batch_plane.edge.handoffs import handoff_counts, turn_handoffs
from pathgrade.batch_plane.edge.walks import turn_walk
from pathgrade.content.graph_walk import DeclaredGraph, NodeVisit, declared_graph
from pathgrade.detectors.graph_adherence import Walk, walk_problems
from pathgrade.schemas.agent_graph import LANGGRAPH_START, AgentGraph, GraphError
from pathgrade.schemas.model import Trace


@dataclass
class GraphWalk:
    """One walk: its conversation, its node visits in order and the user turns it spans."""

    conversation_id: str
    visits: list[NodeVisit] = field(default_factory=list)
    turns: int = 0

    @property
    def nodes(self) -> list[str]:
        return [visit.node for visit in self.visits]


def _conversation_of(trace: Trace) -> str:
    """The trace's conversation id, else the trace id (a turn on its own)."""
    return next(
        (s.genai.conversation_id for s in trace.spans if s.genai.conversation_id), trace.trace_id
    )


def graph_walks(traces: Sequence[Trace], walk: Walk = "turn") -> list[GraphWalk]:
    """The walks of `traces` (traces without a node span are left out), in start order."""
    ordered = sorted(traces, key=lambda trace: trace.spans[0].start_ns)
    turns = [(_conversation_of(trace), turn_walk(trace)) for trace in ordered]
    if walk == "turn":
        return [GraphWalk(conversation, visits, 1) for conversation, visits in turns if visits]
    joined: dict[str, GraphWalk] = {}
    for conversation, visits in turns:
        if visits:
            entry = joined.setdefault(conversation, GraphWalk(conversation))
            entry.visits += visits
            entry.turns += 1
    return list(joined.values())


def conversation_records(walks: Sequence[GraphWalk]) -> list[dict[str, Any]]:
    """node_utility records: one per conversation, its walks and its user turns."""
    grouped: dict[str, list[GraphWalk]] = defaultdict(list)
    for walk in walks:
        grouped[walk.conversation_id].append(walk)
    return [
        {"walks": [w.nodes for w in group], "turns": sum(w.turns for w in group)}
        for group in grouped.values()
    ]


def _iso(ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class _Seen:
    """How often something was seen, in how many walks, and when first and last."""

    count: int = 0
    walks: int = 0
    first_ns: int = 0
    last_ns: int = 0

    def see(self, ns: int) -> None:
        self.count += 1
        self.first_ns = min(self.first_ns, ns) if self.first_ns else ns
        self.last_ns = max(self.last_ns, ns)

    def fields(self, count_name: str) -> dict[str, Any]:
        return {
            count_name: self.count,
            "walks": self.walks,
            "first_seen": _iso(self.first_ns),
            "last_seen": _iso(self.last_ns),
        }


def _declared(traces: Sequence[Trace]) -> DeclaredGraph | None:
    """The union of the structures the traces declare (None when none declares one)."""
    found = [graph for trace in traces if (graph := declared_graph(trace)) is not None]
    if not found:
        return None
    nodes = dict.fromkeys(node for graph in found for node in graph.nodes)
    edges = dict.fromkeys(edge for graph in found for edge in graph.edges)
    return DeclaredGraph(tuple(nodes), tuple(edges))


def infer_graph(traces: Sequence[Trace], walk: Walk = "turn") -> dict[str, Any]:
    """A DSL graph (dict) of one agent from its traces, with what was seen of each part.

    Nodes and edges: as the instrumentation declares them (OpenLLMetry's
    `gen_ai.workflow.*`), else the observed walks' nodes and transitions. Start: the node
    every walk begins at; when walks begin at several nodes, a `__start__` node with an edge
    to each (as `from_langgraph_json` imports a conditional entry); with no walk, the one
    declared node without an in-edge. Terminals: the nodes walks ended at, and declared
    nodes without an out-edge. Tools: those called under each node, in first-seen order.
    Per node `visits`, per edge `traversals`, with `walks` and `first_seen`/`last_seen`;
    observed transitions the declaration lacks are listed under `undeclared_transitions`;
    the hand-offs between agents the traces show (transfers and sub-agent calls, counted
    as `batch_plane.edge.handoffs` does) under `handoffs`. GraphError when there is nothing
    to infer from.
    """
    walks = graph_walks(traces, walk)
    declared = _declared(traces)
    if not walks and declared is None:
        raise GraphError(["traces: no graph node span and no declared graph to infer from"])
    node_seen: dict[str, _Seen] = defaultdict(_Seen)
    edge_seen: dict[tuple[str, str], _Seen] = defaultdict(_Seen)
    tools: dict[str, dict[str, None]] = defaultdict(dict)
    for graph_walk in walks:
        for visit in graph_walk.visits:
            node_seen[visit.node].see(visit.start_ns)
            tools[visit.node].update(dict.fromkeys(visit.tools))
        for before, after in pairwise(graph_walk.visits):
            edge_seen[(before.node, after.node)].see(after.start_ns)
        for node in set(graph_walk.nodes):
            node_seen[node].walks += 1
        for edge in set(pairwise(graph_walk.nodes)):
            edge_seen[edge].walks += 1
    node_ids = list(declared.nodes) if declared else list(node_seen)
    edge_ids = list(declared.edges) if declared else list(edge_seen)
    firsts = list(dict.fromkeys(w.nodes[0] for w in walks))
    start, entry_edges = _start(firsts, node_ids, edge_ids)
    sources = {source for source, _ in edge_ids}
    ends = [w.nodes[-1] for w in walks]
    unexited = [node for node in node_ids if declared and node not in sources]
    nodes = [_node(node, list(tools[node]), node_seen.get(node)) for node in node_ids]
    graph: dict[str, Any] = {
        "start": start,
        "terminals": list(dict.fromkeys([*ends, *unexited])),
        "nodes": ([{"id": start, "tools": []}] if entry_edges else []) + nodes,
        "edges": [{"from": s, "to": t} for s, t in entry_edges]
        + [_edge(edge, edge_seen.get(edge)) for edge in edge_ids],
        "inferred_from": {
            "traces": len(traces),
            "walks": len(walks),
            "walk": walk,
            "structure": "declared" if declared else "observed",
        },
        "handoffs": handoff_counts(turn_handoffs(trace) for trace in traces),
    }
    if declared:
        graph["undeclared_transitions"] = [
            {"from": s, "to": t, "traversals": seen.count}
            for (s, t), seen in edge_seen.items()
            if (s, t) not in set(edge_ids)
        ]
    return graph


def _start(
    firsts: list[str], node_ids: list[str], edge_ids: list[tuple[str, str]]
) -> tuple[str, list[tuple[str, str]]]:
    """The start node, and the entry edges of a `__start__` node when walks begin at several."""
    if len(firsts) == 1:
        return firsts[0], []
    if len(firsts) > 1:
        return LANGGRAPH_START, [(LANGGRAPH_START, node) for node in firsts]
    targets = {target for _, target in edge_ids}
    roots = [node for node in node_ids if node not in targets]
    if len(roots) != 1:
        raise GraphError([f"start: no walk observed and {len(roots)} declared nodes lack in-edges"])
    return roots[0], []


def _node(node: str, tools: list[str], seen: _Seen | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": node, "tools": tools}
    return {**entry, **seen.fields("visits")} if seen else {**entry, "visits": 0}


def _edge(edge: tuple[str, str], seen: _Seen | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"from": edge[0], "to": edge[1]}
    return {**entry, **seen.fields("traversals")} if seen else {**entry, "traversals": 0}


def traffic_metrics(
    graph: AgentGraph, traces: Sequence[Trace], walk: Walk = "turn"
) -> dict[str, Any]:
    """Utility, structural adherence, PG118's check and coverage of `graph` over `traces`.

    `utility`: node_utility over the traffic's conversations. `structure`: the share of
    observed transitions that are graph edges. `adherence`: walks checked with PG118's
    `walk_problems`, how many left the graph and how often each problem occurred.
    `coverage`: the share of the graph's nodes visited and edges traversed, with the rest
    listed. `handoffs`: the hand-offs between agents the traces show, as `infer_graph`
    counts them.
    """
    walks = graph_walks(traces, walk)
    if not walks:
        raise GraphError(["traces: no graph node span in the traffic"])
    problems = [walk_problems(graph, w.nodes, walk) for w in walks]
    problem_counts = Counter(p.problem for found in problems for p in found)
    visited = {node for w in walks for node in w.nodes}
    traversed = {edge for w in walks for edge in pairwise(w.nodes)}
    edges = list(dict.fromkeys((edge.source, edge.target) for edge in graph.edges))
    return {
        "traces": len(traces),
        "walks": len(walks),
        "walk": walk,
        "utility": node_utility(conversation_records(walks), graph),
        "structure": structural_adherence(graph, [{"nodes": w.nodes} for w in walks]),
        "adherence": {
            "walks_checked": len(walks),
            "walks_off_graph": sum(bool(found) for found in problems),
            "problems": dict(sorted(problem_counts.items())),
        },
        "coverage": {
            "nodes": sum(node.id in visited for node in graph.nodes) / len(graph.nodes),
            "edges": sum(edge in traversed for edge in edges) / len(edges) if edges else 1.0,
            "unvisited_nodes": [node.id for node in graph.nodes if node.id not in visited],
            "untraversed_edges": [
                {"from": source, "to": target}
                for source, target in edges
                if (source, target) not in traversed
            ],
        },
        "handoffs": handoff_counts(turn_handoffs(trace) for trace in traces),
    }
