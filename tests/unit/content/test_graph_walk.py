"""The graph structure an instrumentation declares on its spans, live (lists) and stored
(JSON text), and the two graph formats `parse_graph_document` reads."""

from __future__ import annotations

import json

import pytest
from pathgrade.content.graph_documents import parse_graph_document
from pathgrade.content.graph_walk import DeclaredGraph, declared_graph
from pathgrade.schemas import genai
from pathgrade.schemas.agent_graph import GraphError
from pathgrade.schemas.model import Span, Trace


def trace_with(attributes: dict) -> Trace:
    root = Span("t", "a" * 32, "1" * 16, "", "invoke_agent LangGraph", "Internal", 1, 2)
    child = Span("t", "a" * 32, "2" * 16, "1" * 16, "LangGraph.workflow", "Internal", 1, 2,
                 attributes=attributes)  # fmt: skip
    return Trace("t", "a" * 32, [root, child])


NODES = ["greetings", "test_drive", "faq"]
EDGES = ["greetings -> test_drive", "greetings -> faq", "no arrow", " -> faq"]


@pytest.mark.parametrize("encode", [tuple, json.dumps])
def test_declared_graph_reads_openllmetry_workflow_attributes(encode) -> None:
    trace = trace_with({genai.WORKFLOW_NODES: encode(NODES), genai.WORKFLOW_EDGES: encode(EDGES)})
    assert declared_graph(trace) == DeclaredGraph(
        tuple(NODES), (("greetings", "test_drive"), ("greetings", "faq"))
    )
    assert declared_graph(trace_with({genai.WORKFLOW_EDGES: encode(EDGES)})) is None
    assert declared_graph(trace_with({genai.WORKFLOW_NODES: "not json"})) is None


def test_parse_graph_document_tells_the_dsl_from_langgraph_json() -> None:
    dsl = {"start": "a", "terminals": ["a"], "nodes": [{"id": "a"}]}
    assert parse_graph_document(dsl).start == "a"
    langgraph = {
        "nodes": [{"id": "__start__"}, {"id": "a"}, {"id": "__end__"}],
        "edges": [{"source": "__start__", "target": "a"}, {"source": "a", "target": "__end__"}],
    }
    assert parse_graph_document(langgraph).terminals == ["a"]
    with pytest.raises(GraphError, match="expected a JSON object"):
        parse_graph_document([dsl])
    with pytest.raises(GraphError, match="unknown node 'b'"):
        parse_graph_document({**dsl, "edges": [{"from": "a", "to": "b"}]})
