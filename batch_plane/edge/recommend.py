"""Next-turn recommendation (EDGE paper 4.2): given a conversation's node path so far, the
nodes it most likely moves to next and the user intents that lead there.

A pure function of the graph and of a `node_utility` result (an EDGE run's, or live
traffic's over a time range), so the browser UI's conversation page can call it as is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from pathgrade.schemas.agent_graph import AgentGraph


def check_path(graph: AgentGraph, path: Sequence[str]) -> None:
    """ValueError naming what is wrong with a path: empty, or a node the graph lacks."""
    if not path:
        raise ValueError("path: at least one node is required")
    known = {node.id for node in graph.nodes}
    unknown = [node for node in path if node not in known]
    if unknown:
        raise ValueError(f"path: node {unknown[0]!r} is not in the graph")


def recommend_next(
    graph: AgentGraph, path: Sequence[str], utility: Mapping[str, Any]
) -> dict[str, Any]:
    """The likely next nodes after `path` (its last node), from edge utility.

    Probability of a next node n: traversals of (last, n) / traversals of every edge out of
    the last node, in the traffic `utility` describes (a first-order estimate: how the
    conversation got to the last node does not change it). Each candidate carries the node's
    intent and the edge's `when` condition: what a user says to go there. Candidates are
    sorted by probability, most likely first; the probabilities sum to 1 when any way out of
    the last node was observed, and the list is empty otherwise. `off_graph_steps` lists the
    steps of `path` that are not edges of the graph. ValueError for an empty path or a node
    the graph lacks.
    """
    check_path(graph, path)
    nodes = {node.id: node for node in graph.nodes}
    last = path[-1]
    edges = graph.edge_pairs()
    conditions = {(e.source, e.target): e.when for e in graph.edges if e.when is not None}
    out = {
        row["to"]: int(row["traversals"])
        for row in utility.get("edges", [])
        if row["from"] == last and row["traversals"] > 0
    }
    total = sum(out.values())
    candidates = [
        {
            "node": target,
            "probability": count / total,
            "traversals": count,
            "intent": nodes[target].intent if target in nodes else "",
            "when": conditions.get((last, target)),
            "on_graph": (last, target) in edges,
        }
        for target, count in out.items()
    ]
    candidates.sort(key=lambda c: (-c["traversals"], c["node"]))
    return {
        "path": list(path),
        "after": last,
        "traversals": total,
        "next": candidates,
        "off_graph_steps": [{"from": a, "to": b} for a, b in pairwise(path) if (a, b) not in edges],
    }
