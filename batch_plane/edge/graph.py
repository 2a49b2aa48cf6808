"""EDGE path enumeration and test scenarios over an agent graph (the DSL itself is
`schemas.agent_graph`, its validation and the LangGraph import `content.graph_documents`).

Everything here is a pure function of its arguments except `write_scenarios`, which writes
a JSONL file. See docs/edge.md for the decisions taken.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pathgrade.content.graph_documents import validate_graph
from pathgrade.schemas.agent_graph import AgentGraph, GraphError
from pydantic import BaseModel


class Scenario(BaseModel):
    """A test scenario that should drive the agent along one graph path."""

    id: str
    intent: str
    expected_nodes: list[str]
    expected_actions: list[str]


def enumerate_paths(
    graph: AgentGraph, max_visits: int = 1, max_paths: int = 1_000_000
) -> list[list[str]]:
    """All start-to-terminal node paths, each node visited at most `max_visits` times.

    Iterative depth-first search in edge order. Reaching a terminal records a path; a
    terminal with out-edges is also continued, so longer paths through it are recorded
    too. Raises GraphError for an invalid graph or when more than `max_paths` paths exist.
    """
    if max_visits < 1:
        raise ValueError(f"max_visits: must be at least 1, got {max_visits}")
    validate_graph(graph)
    successors = graph.successors()
    terminals = set(graph.terminals)
    visits = dict.fromkeys(successors, 0)
    path = [graph.start]
    visits[graph.start] = 1
    paths = [[graph.start]] if graph.start in terminals else []
    pending = [iter(successors[graph.start])]
    while pending:
        nxt = next(pending[-1], None)
        if nxt is None:
            pending.pop()
            visits[path.pop()] -= 1
            continue
        if visits[nxt] >= max_visits:
            continue
        path.append(nxt)
        visits[nxt] += 1
        if nxt in terminals:
            if len(paths) >= max_paths:
                raise GraphError([f"paths: more than max_paths={max_paths} paths"])
            paths.append(path.copy())
        pending.append(iter(successors[nxt]))
    return paths


def paths_document(paths: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The enumeration result as `{"count": N, "paths": [[node ids], ...]}`."""
    return {"count": len(paths), "paths": [list(path) for path in paths]}


def scenario_id(path: Sequence[str]) -> str:
    """A stable id for the scenario of `path` (same path, same id)."""
    digest = hashlib.sha256("\x1f".join(path).encode()).hexdigest()
    return f"path-{digest[:12]}"


def scenarios(graph: AgentGraph, paths: Sequence[Sequence[str]]) -> list[Scenario]:
    """One Scenario per path: joined node intents, the node sequence, the tools in order."""
    nodes = {node.id: node for node in graph.nodes}
    result = []
    for path in paths:
        unknown = [node_id for node_id in path if node_id not in nodes]
        if unknown:
            raise GraphError([f"path {list(path)!r}: unknown node {unknown[0]!r}"])
        steps = [nodes[node_id] for node_id in path]
        result.append(
            Scenario(
                id=scenario_id(path),
                intent="; ".join(step.intent for step in steps if step.intent),
                expected_nodes=list(path),
                expected_actions=[tool for step in steps for tool in step.tools],
            )
        )
    return result


def write_scenarios(items: Iterable[Scenario], path: str | Path) -> int:
    """Write scenarios as JSONL (one object per line); returns how many were written."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for item in items:
            out.write(json.dumps(item.model_dump(), ensure_ascii=False) + "\n")
            count += 1
    return count
