"""Agent graphs the tests share: a graph from its edges (`make_graph`), LangGraph's JSON of a
ReAct agent (`REACT_AGENT_JSON`), and what two graphs must agree on to be the same graph for
`edge infer` (`structure`)."""

from __future__ import annotations

from typing import Any

from pathgrade.content.graph_documents import load_graph
from pathgrade.schemas.agent_graph import AgentGraph


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


def make_graph(
    edges: list[tuple[str, str]], start: str, terminals: list[str], extra_nodes: tuple = ()
) -> AgentGraph:
    """A graph whose nodes are the edge ends (plus `extra_nodes`), tools named after nodes."""
    ids = list(dict.fromkeys([start, *[n for e in edges for n in e], *terminals, *extra_nodes]))
    return AgentGraph.model_validate(
        {
            "start": start,
            "terminals": terminals,
            "nodes": [{"id": i, "tools": [f"{i}_tool"], "intent": f"do {i}"} for i in ids],
            "edges": [{"from": a, "to": b} for a, b in edges],
        }
    )


# The shape of `compiled.get_graph().to_json()`: langchain-ai/langchain,
# libs/core/langchain_core/runnables/graph.py, `Graph.to_json` (nodes: id/type/data and
# optional metadata; edges: source/target, optional data and `conditional: true`).
REACT_AGENT_JSON: dict[str, Any] = {
    "nodes": [
        {"id": "__start__", "type": "schema", "data": "__start__"},
        {
            "id": "agent",
            "type": "runnable",
            "data": {"id": ["langgraph", "utils", "RunnableCallable"], "name": "agent"},
            "metadata": {"tools": ["llm"], "intent": "answer the user"},
        },
        {
            "id": "tools",
            "type": "runnable",
            "data": {"id": ["langgraph", "prebuilt", "ToolNode"], "name": "tools"},
            "metadata": {"tools": ["search"]},
        },
        {"id": "__end__", "type": "schema", "data": "__end__"},
    ],
    "edges": [
        {"source": "__start__", "target": "agent"},
        {"source": "agent", "target": "tools", "data": "continue", "conditional": True},
        {"source": "agent", "target": "__end__", "data": "end", "conditional": True},
        {"source": "tools", "target": "agent"},
    ],
}
