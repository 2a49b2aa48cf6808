"""The walk through an agent graph that one trace (one turn) shows, whatever instrumentation
wrote it, and the graph structure an instrumentation declares on its spans.

Node spans, by convention (the first convention that finds a node in the trace wins):

1. LangGraph, as OpenLLMetry writes it: a span whose
   `traceloop.association.properties.langgraph_node` names the node and whose own name for
   the step (`gen_ai.task.name`, else `traceloop.entity.name`) is that node. The spans
   nested in a node (its chat model, its routing function) carry the same property under
   other names and are not visits.
2. LangGraph, as OpenInference writes it: a span named after the node whose `metadata` JSON
   holds `"langgraph_node": <that name>`.
3. GenAI: an `invoke_agent` span below the turn's top (`Trace.root`) whose
   `gen_ai.agent.name` differs from the top's (a sub-agent of the agent that runs the
   turn); the node is the agent name.

Only top-level visits count: a node span nested inside another node span (a subgraph's
inner node, a sub-agent's own sub-agent) belongs to that node's visit. A visit's tools are
the `execute_tool` spans whose nearest node span it is. Visits are in start order.

Declared structure: OpenLLMetry's LangChain instrumentation writes the graph it runs on the
graph's root span: `gen_ai.workflow.nodes` (node names) and `gen_ai.workflow.edges`
("source -> target"; edges from `__start__` and into `__end__` are left out). Values are
lists on the wire and JSON text once stored; both are read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pathgrade.content.conventions import json_or_text
from pathgrade.schemas import genai
from pathgrade.schemas.model import Span, Trace

EDGE_ARROW = " -> "


@dataclass(frozen=True, slots=True)
class NodeVisit:
    """One pass of a turn through a graph node: the node, its span and its tool calls."""

    node: str
    span_id: str
    start_ns: int
    tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeclaredGraph:
    """The structure an instrumentation declared: node names and (source, target) edges."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]


def _langgraph_node_openllmetry(span: Span) -> str:
    node = span.attributes.get(genai.TL_LANGGRAPH_NODE)
    if not isinstance(node, str) or not node:
        return ""
    own = span.attributes.get(genai.TASK_NAME) or span.attributes.get(genai.TL_ENTITY_NAME)
    return node if own == node else ""


def _langgraph_node_openinference(span: Span) -> str:
    metadata = json_or_text(span.attributes.get(genai.OI_METADATA))
    node = metadata.get("langgraph_node") if isinstance(metadata, dict) else None
    return node if isinstance(node, str) and node == span.name else ""


def langgraph_node(span: Span) -> str:
    """The LangGraph node `span` is a visit of (conventions 1 and 2 above), "" for none."""
    if _LANGGRAPH_KEYS.isdisjoint(span.attributes):  # most spans: neither convention's key
        return ""
    return _langgraph_node_openllmetry(span) or _langgraph_node_openinference(span)


_LANGGRAPH_KEYS = frozenset({genai.TL_LANGGRAPH_NODE, genai.OI_METADATA})


def _genai_node(top: Span | None) -> Callable[[Span], str]:
    top_agent = top.genai.agent_name if top else ""

    def node_of(span: Span) -> str:
        name = span.genai.agent_name
        is_agent = span.genai.operation == genai.OP_INVOKE_AGENT and span is not top
        return name if is_agent and name and name != top_agent else ""

    return node_of


def langgraph_nodes(spans: Iterable[Span]) -> dict[str, str]:
    """The LangGraph node visits among `spans`: span id -> node (`langgraph_node`)."""
    keyed = [s for s in spans if not _LANGGRAPH_KEYS.isdisjoint(s.attributes)]  # most: none
    return {span.span_id: node for span in keyed if (node := langgraph_node(span))}


def node_visits(trace: Trace, nodes: dict[str, str] | None = None) -> list[NodeVisit]:
    """The turn's walk: its top-level node visits in start order, each with its tools.
    `nodes`: the trace's `langgraph_nodes` when the caller has them already."""
    nodes = langgraph_nodes(trace.spans) if nodes is None else nodes
    if not nodes:
        node_of = _genai_node(trace.root)
        agents = (s for s in trace.spans if s.genai.operation == genai.OP_INVOKE_AGENT)
        nodes = {span.span_id: node for span in agents if (node := node_of(span))}
    return _visits(trace, nodes) if nodes else []


def _visits(trace: Trace, nodes: dict[str, str]) -> list[NodeVisit]:
    """Top-level node spans (`nodes`: span id -> node) with the tools nested under each."""
    parents = {span.span_id: span.parent_span_id for span in trace.spans}

    def nearest_node(span_id: str) -> str:
        """The closest node span above `span_id` ("" when there is none)."""
        seen: set[str] = set()
        current = parents.get(span_id, "")
        while current and current not in seen:
            if current in nodes:
                return current
            seen.add(current)
            current = parents.get(current, "")
        return ""

    top = [s for s in trace.spans if s.span_id in nodes and not nearest_node(s.span_id)]
    tools: dict[str, list[str]] = {span.span_id: [] for span in top}
    for span in trace.by_operation(genai.OP_EXECUTE_TOOL):
        owner = nearest_node(span.span_id)
        while owner and owner not in tools:  # a nested node's tool is its top-level node's
            owner = nearest_node(owner)
        if owner:
            tools[owner].append(span.genai.tool_name or span.name)
    return [
        NodeVisit(nodes[span.span_id], span.span_id, span.start_ns, tuple(tools[span.span_id]))
        for span in top
    ]


def declared_graph(trace: Trace) -> DeclaredGraph | None:
    """The graph structure declared on a span of the trace (None when none declares one)."""
    for span in trace.spans:
        nodes = _string_list(span.attributes.get(genai.WORKFLOW_NODES))
        if nodes:
            texts = _string_list(span.attributes.get(genai.WORKFLOW_EDGES))
            edges = [_edge(text) for text in texts]
            return DeclaredGraph(tuple(nodes), tuple(edge for edge in edges if edge))
    return None


def _edge(text: str) -> tuple[str, str] | None:
    source, arrow, target = text.partition(EDGE_ARROW)
    return (source.strip(), target.strip()) if arrow and source.strip() and target.strip() else None


def _string_list(value: Any) -> list[str]:
    """A list of strings from a list attribute or its stored JSON text ([] otherwise)."""
    value = json_or_text(value)
    if not isinstance(value, list | tuple):
        return []
    return [item for item in value if isinstance(item, str) and item]
