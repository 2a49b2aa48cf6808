"""The conversation page's next-turn advice (EDGE paper 4.2): the conversation's node path so
far, and the nodes it most likely moves to next with the user intents that lead there (after
the whole path, and after each turn beside the node the next turn took), from
the edge utility of an EDGE run in the store (`batch_plane.edge.recommend`, as
`pathgrade edge recommend --from-run` gives it).

The run is the one named by the page's `?run=` parameter, else the conversation's own run
(a simulated conversation of an EDGE run), else the latest EDGE run of the conversation's
tenant whose graph has every node of the path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pathgrade.batch_plane.edge.recommend import recommend_next
from pathgrade.batch_plane.edge.store import EdgeRunNotFound, load_manifest, run_metrics
from pathgrade.batch_plane.edge.traffic import graph_walks
from pathgrade.batch_plane.store import edge_runs
from pathgrade.batch_plane.store.trace_rows import load_traces
from pathgrade.content.graph_documents import load_graph
from pathgrade.schemas.agent_graph import AgentGraph
from pathgrade.web.store_reads import ReadStore, viewing

MAX_TURNS_WALKED = 100  # the path so far: the conversation's latest turns
MAX_RUNS_TRIED = 20  # the tenant's latest EDGE runs looked at for a graph with the path


@dataclass
class TurnStep:
    """After one turn: the path so far, the advice from there, and the node the next turn
    actually went to ("" after the last turn)."""

    turn: int  # 1-based, among the turns that show a graph node
    path: list[str]
    advice: dict[str, Any]
    taken: str = ""

    @property
    def taken_probability(self) -> float | None:
        """The advice's probability of the node taken next (None: taken was not advised)."""
        odds = {c["node"]: c["probability"] for c in self.advice["next"]}
        return odds.get(self.taken)


@dataclass
class NextTurn:
    """What the page shows: the path, the run the advice comes from, the advice after the
    whole path and after each turn (None and [] when no run's graph has the path; `reason`
    then says why)."""

    path: list[str]
    run_id: str = ""
    advice: dict[str, Any] | None = None
    steps: list[TurnStep] = field(default_factory=list)
    reason: str = ""


def turn_paths(store: ReadStore, trace_ids: list[str]) -> list[list[str]]:
    """The graph nodes each turn of the conversation visited (its latest turns, in order;
    turns without a node span are left out), in one query: the caller's `viewing` scope
    keeps it to the conversation's tenant."""
    traces = load_traces(store, trace_ids[-MAX_TURNS_WALKED:])
    return [walk.nodes for walk in graph_walks(traces, "turn")]


def _steps(graph: AgentGraph, turns: list[list[str]], utility: dict[str, Any]) -> list[TurnStep]:
    """The advice after each turn, with the node the next turn went to."""
    steps, path = [], []
    for index, nodes in enumerate(turns):
        path = [*path, *nodes]
        taken = turns[index + 1][0] if index + 1 < len(turns) else ""
        steps.append(TurnStep(index + 1, path, recommend_next(graph, path, utility), taken))
    return steps


def _edge_runs(store: ReadStore, tenant: str, trace_ids: list[str]) -> list[str]:
    """The conversation's own EDGE run first, then the tenant's latest EDGE runs."""
    own = edge_runs.of_traces(store, tenant, trace_ids)
    return list(dict.fromkeys(own + edge_runs.latest(store, tenant, MAX_RUNS_TRIED)))


def next_turn(
    store: ReadStore, tenant: str, trace_ids: list[str], run_id: str | None = None
) -> NextTurn:
    """The advice for the conversation whose turns are `trace_ids` (oldest first)."""
    with viewing(tenant):  # the conversation's tenant only, also for a loopback viewer
        turns = turn_paths(store, trace_ids)
        path = [node for nodes in turns for node in nodes]
        if not path:
            return NextTurn(path, reason="no turn of this conversation has a graph node span")
        candidates = [run_id] if run_id else _edge_runs(store, tenant, trace_ids)
        for candidate in candidates:
            try:
                graph = load_graph(load_manifest(store, candidate).graph)
            except EdgeRunNotFound:
                continue
            if set(path) <= {node.id for node in graph.nodes}:
                utility = run_metrics(store, candidate)["utility"]
                steps = _steps(graph, turns, utility)
                return NextTurn(path, candidate, steps[-1].advice, steps)
    if run_id:
        reason = f"EDGE run {run_id!r} is not in the store, or its graph lacks a node of this path"
    else:
        reason = "no EDGE run in the store has a graph with every node of this path"
    return NextTurn(path, reason=reason)
