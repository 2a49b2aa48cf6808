"""What two agent graphs must agree on to be the same graph for `edge infer`."""

from __future__ import annotations

from typing import Any

from pathgrade.schemas.agent_graph import load_graph


def structure(graph: dict[str, Any]) -> tuple[Any, ...]:
    """A DSL graph's start, terminals, edges and each node's tools (intents, conditions and
    counts left out: traces do not carry them)."""
    parsed = load_graph(graph)
    return (
        parsed.start,
        set(parsed.terminals),
        parsed.edge_pairs(),
        {node.id: node.tools for node in parsed.nodes},
    )
