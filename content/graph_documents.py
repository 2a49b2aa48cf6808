"""Agent graph documents read and checked: the EDGE graph DSL (`schemas.agent_graph`) or
LangGraph's JSON, parsed, imported and validated (every structural problem named).

Pure functions of their arguments: the batch plane enumerates and scores graphs, the
detectors check live turns against them (docs/edge.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from pathgrade.schemas.agent_graph import (
    LANGGRAPH_END,
    LANGGRAPH_START,
    AgentEdge,
    AgentGraph,
    AgentNode,
    GraphError,
)


def load_graph(data: Mapping[str, Any]) -> AgentGraph:
    """Parse DSL JSON and validate its structure (pydantic ValidationError or GraphError)."""
    graph = AgentGraph.model_validate(data)
    validate_graph(graph)
    return graph


def graph_problems(graph: AgentGraph) -> list[str]:
    """Every structural problem of `graph`, each naming the node or edge and the reason."""
    node_ids = [node.id for node in graph.nodes]
    known = set(node_ids)
    problems = [f"node {node_id!r}: duplicate node id" for node_id in _duplicates(node_ids)]
    for index, edge in enumerate(graph.edges):
        for end, node_id in (("from", edge.source), ("to", edge.target)):
            if node_id not in known:
                problems.append(
                    f"edge {index} ({edge.source!r} -> {edge.target!r}): "
                    f"unknown node {node_id!r} in {end!r}"
                )
    if graph.start not in known:
        problems.append(f"start {graph.start!r}: unknown node")
    if not graph.terminals:
        problems.append("terminals: at least one terminal node is required")
    problems += [f"terminal {t!r}: unknown node" for t in graph.terminals if t not in known]
    if problems:
        return problems
    return _reachability_problems(graph)


def validate_graph(graph: AgentGraph) -> None:
    """Raise GraphError listing all problems when the graph is unsound."""
    problems = graph_problems(graph)
    if problems:
        raise GraphError(problems)


def _duplicates(items: Iterable[str]) -> list[str]:
    """Items occurring more than once, in first-repeat order."""
    seen: set[str] = set()
    repeated: list[str] = []
    for item in items:
        if item in seen and item not in repeated:
            repeated.append(item)
        seen.add(item)
    return repeated


def _reachable(origins: Iterable[str], neighbours: Mapping[str, list[str]]) -> set[str]:
    """Nodes reachable from `origins` (included) following `neighbours`."""
    reached = set(origins)
    queue = deque(reached)
    while queue:
        for nxt in neighbours.get(queue.popleft(), []):
            if nxt not in reached:
                reached.add(nxt)
                queue.append(nxt)
    return reached


def _reachability_problems(graph: AgentGraph) -> list[str]:
    """Unreachable nodes, dead-end nodes and an unreachable terminal set."""
    forward = graph.successors()
    backward: dict[str, list[str]] = {node.id: [] for node in graph.nodes}
    for source, targets in forward.items():
        for target in targets:
            backward[target].append(source)
    from_start = _reachable([graph.start], forward)
    to_terminal = _reachable(graph.terminals, backward)
    problems: list[str] = []
    if graph.start not in to_terminal:
        problems.append(f"start {graph.start!r}: no terminal is reachable from the start")
    for node in graph.nodes:
        if node.id not in from_start:
            problems.append(f"node {node.id!r}: unreachable from start {graph.start!r}")
        elif node.id not in to_terminal and node.id != graph.start:
            problems.append(f"node {node.id!r}: no terminal is reachable from it")
    return problems


def from_langgraph_json(data: Mapping[str, Any]) -> AgentGraph:
    """Convert LangGraph's `compiled.get_graph().to_json()` into an (unvalidated) AgentGraph.

    The start is the target of the `__start__` edge; when `__start__` has several targets
    (a conditional entry point) it stays in the graph as a tool-less start node. Terminals
    are the sources of edges into `__end__`. Node `metadata.tools` / `metadata.intent` fill
    `tools` / `intent`; other node fields (`type`, `data`, `metadata`) are kept as extras. A
    conditional edge's `data` label becomes `when`.
    """
    raw_nodes = _field(data, "nodes", list)
    edges = [_langgraph_ends(index, raw) for index, raw in enumerate(_field(data, "edges", list))]
    entry = [target for source, target, _ in edges if source == LANGGRAPH_START]
    if not entry:
        raise GraphError([f"edges: no edge leaves {LANGGRAPH_START!r}, the start is unknown"])
    keep_start = len(entry) > 1
    dropped = {LANGGRAPH_END} if keep_start else {LANGGRAPH_START, LANGGRAPH_END}
    nodes = [_langgraph_node(index, raw) for index, raw in enumerate(raw_nodes)]
    nodes = [node for node in nodes if node.id not in dropped]
    dsl_edges = [
        _langgraph_edge(source, target, raw)
        for source, target, raw in edges
        if source not in dropped and target not in dropped
    ]
    terminals = list(dict.fromkeys(s for s, t, _ in edges if t == LANGGRAPH_END))
    return AgentGraph(
        start=LANGGRAPH_START if keep_start else entry[0],
        terminals=terminals,
        nodes=nodes,
        edges=dsl_edges,
    )


def _field(data: Mapping[str, Any], name: str, kind: type) -> Any:
    """`data[name]`, checked to be of `kind` (GraphError naming the field otherwise)."""
    value = data.get(name)
    if not isinstance(value, kind):
        raise GraphError([f"{name}: expected a {kind.__name__}, got {type(value).__name__}"])
    return value


def _langgraph_ends(index: int, raw: Any) -> tuple[str, str, Mapping[str, Any]]:
    """(source, target, raw) of LangGraph JSON edge `index` (GraphError if malformed)."""
    if not isinstance(raw, Mapping) or "source" not in raw or "target" not in raw:
        raise GraphError([f"edges[{index}]: expected an object with 'source' and 'target'"])
    return str(raw["source"]), str(raw["target"]), raw


def _langgraph_node(index: int, raw: Any) -> AgentNode:
    """LangGraph JSON node `index` as an AgentNode (its other fields kept as extras)."""
    if not isinstance(raw, Mapping) or "id" not in raw:
        raise GraphError([f"nodes[{index}]: expected an object with an 'id'"])
    metadata = raw.get("metadata") or {}
    return AgentNode.model_validate(
        {
            **raw,
            "id": str(raw["id"]),
            "tools": list(metadata.get("tools", [])),
            "intent": str(metadata.get("intent", "")),
        }
    )


def _langgraph_edge(source: str, target: str, raw: Mapping[str, Any]) -> AgentEdge:
    """One LangGraph JSON edge as an AgentEdge."""
    conditional = bool(raw.get("conditional", False))
    label = raw.get("data")
    when = str(label) if conditional and label is not None else None
    return AgentEdge(source=source, target=target, when=when, conditional=conditional)


def parse_graph_document(data: Any) -> AgentGraph:
    """A validated graph from JSON data in either format: the EDGE DSL (it has `start`) or
    LangGraph's `get_graph().to_json()` (edges with `source`/`target`, no `start`).

    Raises GraphError (structure, LangGraph shape) or pydantic's ValidationError (a DSL
    field), each naming what is wrong.
    """
    if not isinstance(data, Mapping):
        raise GraphError([f"graph: expected a JSON object, got {type(data).__name__}"])
    if "start" in data:
        return load_graph(data)
    graph = from_langgraph_json(data)
    validate_graph(graph)
    return graph
