"""Agent graphs as the EDGE graph DSL writes them: sub-agent nodes (with their tools and an
intent), directed edges with an optional `when` condition, one `start` node and the
`terminals` (docs/edge.md); and the error that names what makes a graph unsound. Reading,
validating and importing LangGraph's JSON are `content.graph_documents`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

LANGGRAPH_START = "__start__"
LANGGRAPH_END = "__end__"


class GraphError(ValueError):
    """A graph is structurally unsound; `problems` lists every problem found."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid agent graph:\n" + "\n".join(f"- {p}" for p in self.problems))


class AgentNode(BaseModel):
    """One sub-agent: its id, the tools it may call and what it is for."""

    model_config = ConfigDict(extra="allow")

    id: str
    tools: list[str] = Field(default_factory=list)
    intent: str = ""


class AgentEdge(BaseModel):
    """A directed hand-off `from` -> `to`, taken when the optional `when` condition holds."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    when: str | None = None


class AgentGraph(BaseModel):
    """An agent graph as written in the EDGE JSON DSL (unknown fields are kept)."""

    model_config = ConfigDict(extra="allow")

    start: str
    terminals: list[str]
    nodes: list[AgentNode]
    edges: list[AgentEdge] = Field(default_factory=list)

    def successors(self) -> dict[str, list[str]]:
        """Distinct targets of every node's out-edges, in edge order."""
        targets: dict[str, list[str]] = {node.id: [] for node in self.nodes}
        for edge in self.edges:
            out = targets.setdefault(edge.source, [])
            if edge.target not in out:
                out.append(edge.target)
        return targets

    def edge_pairs(self) -> set[tuple[str, str]]:
        """The (from, to) pairs of all edges."""
        return {(edge.source, edge.target) for edge in self.edges}

    def to_dsl(self) -> dict[str, Any]:
        """The graph as DSL JSON (edges keyed `from`/`to`, unset optional fields omitted)."""
        return self.model_dump(by_alias=True, exclude_none=True)
