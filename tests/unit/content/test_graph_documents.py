"""Agent graph documents checked (every structural problem named) and LangGraph's JSON
imported."""

from __future__ import annotations

import pytest
from pathgrade.content.graph_documents import (
    from_langgraph_json,
    graph_problems,
    load_graph,
    validate_graph,
)
from pathgrade.schemas.agent_graph import AgentGraph, GraphError

from tests.support.graphs import REACT_AGENT_JSON, make_graph


def test_brief_example_fails_validation_with_every_problem() -> None:
    graph = AgentGraph.model_validate(
        {
            "start": "a",
            "terminals": ["z"],
            "nodes": [{"id": "a", "tools": ["kb"], "intent": "..."}],
            "edges": [{"from": "a", "to": "b", "when": "..."}],
        }
    )
    with pytest.raises(GraphError) as caught:
        validate_graph(graph)
    assert caught.value.problems == [
        "edge 0 ('a' -> 'b'): unknown node 'b' in 'to'",
        "terminal 'z': unknown node",
    ]


def test_structural_problems_are_all_listed() -> None:
    graph = AgentGraph.model_validate(
        {
            "start": "nowhere",
            "terminals": ["t", "ghost"],
            "nodes": [{"id": "a"}, {"id": "a"}, {"id": "t"}],
            "edges": [{"from": "x", "to": "t"}],
        }
    )
    problems = graph_problems(graph)
    assert "node 'a': duplicate node id" in problems
    assert "edge 0 ('x' -> 't'): unknown node 'x' in 'from'" in problems
    assert "start 'nowhere': unknown node" in problems
    assert "terminal 'ghost': unknown node" in problems
    assert len(problems) == 4


def test_unreachable_and_dead_end_nodes_are_named() -> None:
    graph = make_graph(
        [("s", "a"), ("a", "t"), ("s", "trap"), ("island", "t")], "s", ["t"], ("alone",)
    )
    assert sorted(graph_problems(graph)) == [
        "node 'alone': unreachable from start 's'",
        "node 'island': unreachable from start 's'",
        "node 'trap': no terminal is reachable from it",
    ]


def test_no_terminal_reachable_at_all() -> None:
    graph = make_graph([("s", "a"), ("b", "t")], "s", ["t"])
    problems = graph_problems(graph)
    assert problems[0] == "start 's': no terminal is reachable from the start"
    assert "node 'a': no terminal is reachable from it" in problems
    assert "node 'b': unreachable from start 's'" in problems


def test_empty_terminals_is_a_problem() -> None:
    graph = make_graph([("s", "a")], "s", [])
    assert "terminals: at least one terminal node is required" in graph_problems(graph)


def test_load_graph_validates() -> None:
    good = {"start": "a", "terminals": ["b"], "nodes": [{"id": "a"}, {"id": "b"}]}
    with pytest.raises(GraphError, match="unreachable"):
        load_graph(good)
    good["edges"] = [{"from": "a", "to": "b"}]
    assert load_graph(good).start == "a"


# --- LangGraph import -------------------------------------------------------------------


def test_langgraph_react_agent_imports() -> None:
    graph = from_langgraph_json(REACT_AGENT_JSON)
    validate_graph(graph)
    assert graph.start == "agent"
    assert graph.terminals == ["agent"]
    assert [n.id for n in graph.nodes] == ["agent", "tools"]
    assert graph.nodes[0].tools == ["llm"] and graph.nodes[0].intent == "answer the user"
    assert graph.nodes[1].model_extra["type"] == "runnable"
    assert [(e.source, e.target, e.when) for e in graph.edges] == [
        ("agent", "tools", "continue"),
        ("tools", "agent", None),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"nodes": [], "edges": []}, "no edge leaves '__start__'"),
        ({"nodes": {}, "edges": []}, "nodes: expected a list"),
        ({"nodes": [], "edges": [{"source": "__start__"}]}, r"edges\[0\]"),
        ({"nodes": [{"name": "x"}], "edges": [{"source": "__start__", "target": "x"}]}, "nodes"),
    ],
)
def test_langgraph_malformed_input_names_the_field(data: dict, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        from_langgraph_json(data)
