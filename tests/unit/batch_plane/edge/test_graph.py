"""Tests of EDGE path enumeration and scenarios (the DSL model is tested in
tests/unit/schemas/test_agent_graph.py, its validation and the LangGraph import in
tests/unit/content/test_graph_documents.py)."""

from __future__ import annotations

import json
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pathgrade.batch_plane.edge.graph import (
    enumerate_paths,
    paths_document,
    scenario_id,
    scenarios,
    write_scenarios,
)
from pathgrade.content.graph_documents import from_langgraph_json
from pathgrade.schemas.agent_graph import AgentGraph, GraphError

from tests.support.graphs import REACT_AGENT_JSON, make_graph


def diamond_chain(diamonds: int) -> AgentGraph:
    """s0 -> (a_i | b_i) -> s_{i+1}, repeated: 2**diamonds paths from s0 to the last s."""
    edges = []
    for i in range(diamonds):
        for branch in ("a", "b"):
            edges += [(f"s{i}", f"{branch}{i}"), (f"{branch}{i}", f"s{i + 1}")]
    return make_graph(edges, "s0", [f"s{diamonds}"])


def complete_dag(size: int) -> AgentGraph:
    """Edges i -> j for every i < j: 2**(size - 2) paths from 0 to size - 1."""
    edges = [(str(i), str(j)) for i in range(size) for j in range(i + 1, size)]
    return make_graph(edges, "0", [str(size - 1)])


def layered_graph(layers: int, width: int) -> AgentGraph:
    """start -> layer 1 -> ... -> layer n -> end, consecutive layers fully connected."""
    columns = [["start"], *[[f"L{i}_{j}" for j in range(width)] for i in range(layers)], ["end"]]
    edges = [(a, b) for left, right in pairwise(columns) for a in left for b in right]
    return make_graph(edges, "start", ["end"])


# --- LangGraph graphs enumerated -------------------------------------------------------


def test_terminal_with_out_edges_ends_a_path_and_also_continues() -> None:
    graph = from_langgraph_json(REACT_AGENT_JSON)
    assert enumerate_paths(graph) == [["agent"]]
    assert enumerate_paths(graph, max_visits=2) == [["agent"], ["agent", "tools", "agent"]]


def test_langgraph_conditional_entry_keeps_start_node() -> None:
    data = {
        "nodes": [{"id": i} for i in ("__start__", "billing", "support", "__end__")],
        "edges": [
            {"source": "__start__", "target": "billing", "conditional": True},
            {"source": "__start__", "target": "support", "conditional": True},
            {"source": "billing", "target": "__end__"},
            {"source": "support", "target": "__end__"},
        ],
    }
    graph = from_langgraph_json(data)
    assert graph.start == "__start__"
    assert sorted(graph.terminals) == ["billing", "support"]
    assert enumerate_paths(graph) == [["__start__", "billing"], ["__start__", "support"]]


def test_langgraph_uuid_nodes_exported_as_integers_become_strings() -> None:
    data = {
        "nodes": [{"id": "__start__"}, {"id": 1}, {"id": "__end__"}],
        "edges": [{"source": "__start__", "target": 1}, {"source": 1, "target": "__end__"}],
    }
    assert enumerate_paths(from_langgraph_json(data)) == [["1"]]


# --- path enumeration -------------------------------------------------------------------


@pytest.mark.parametrize("diamonds", [1, 2, 3, 5, 8])
def test_diamond_chain_has_two_to_the_n_paths(diamonds: int) -> None:
    paths = enumerate_paths(diamond_chain(diamonds))
    assert len(paths) == 2**diamonds
    assert len({tuple(p) for p in paths}) == len(paths)


@pytest.mark.parametrize("size", [2, 3, 4, 7, 10])
def test_complete_dag_has_two_to_the_n_minus_two_paths(size: int) -> None:
    assert len(enumerate_paths(complete_dag(size))) == 2 ** (size - 2)


@pytest.mark.parametrize(("visits", "expected"), [(1, 2), (2, 4), (3, 6)])
def test_two_node_cycle_is_bounded_by_visits(visits: int, expected: int) -> None:
    # a <-> b, both may exit to t: K visits per node give 2K paths (a t, a b t, a b a t, ...)
    graph = make_graph([("a", "b"), ("b", "a"), ("a", "t"), ("b", "t")], "a", ["t"])
    paths = enumerate_paths(graph, max_visits=visits)
    assert len(paths) == expected
    assert max(p.count("a") for p in paths) == visits


def test_paths_follow_edges_and_end_at_terminals() -> None:
    graph = make_graph([("a", "b"), ("b", "a"), ("b", "c"), ("c", "b"), ("c", "t")], "a", ["t"])
    edges = graph.edge_pairs()
    for path in enumerate_paths(graph, max_visits=3):
        assert path[0] == "a" and path[-1] == "t"
        assert all(pair in edges for pair in pairwise(path))
        assert max(path.count(n) for n in set(path)) <= 3


def test_start_that_is_a_terminal_is_a_path() -> None:
    assert enumerate_paths(make_graph([], "only", ["only"])) == [["only"]]


def test_thirty_node_graph_with_thousands_of_paths_is_enumerated() -> None:
    graph = layered_graph(layers=7, width=4)
    assert len(graph.nodes) == 30
    paths = enumerate_paths(graph)
    assert len(paths) == 4**7
    assert len({tuple(path) for path in paths}) == 4**7


def test_long_chain_needs_no_recursion() -> None:
    chain = [(f"n{i}", f"n{i + 1}") for i in range(5000)]
    assert enumerate_paths(make_graph(chain, "n0", ["n5000"]))[0][-1] == "n5000"


def test_bad_max_visits_and_path_explosion_are_refused() -> None:
    with pytest.raises(ValueError, match="max_visits"):
        enumerate_paths(diamond_chain(2), max_visits=0)
    with pytest.raises(GraphError, match="max_paths=10"):
        enumerate_paths(diamond_chain(4), max_paths=10)


def test_invalid_graph_is_not_enumerated() -> None:
    with pytest.raises(GraphError, match="unknown node"):
        enumerate_paths(make_graph([("a", "b")], "a", ["z"]).model_copy(update={"nodes": []}))


@st.composite
def random_dags(draw: st.DrawFn) -> AgentGraph:
    """Random DAGs over nodes 0..n-1 (edges only go up) where every node lies on a path."""
    size = draw(st.integers(min_value=2, max_value=9))
    edges = {(str(i), str(i + 1)) for i in range(size - 1)}
    pairs = [(str(i), str(j)) for i in range(size) for j in range(i + 2, size)]
    edges |= set(draw(st.lists(st.sampled_from(pairs), unique=True))) if pairs else set()
    return make_graph(sorted(edges), "0", [str(size - 1)])


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_enumeration_matches_dynamic_programming_count(graph: AgentGraph) -> None:
    successors = graph.successors()

    @cache
    def count_from(node: str) -> int:
        return (node in graph.terminals) + sum(count_from(n) for n in successors[node])

    assert len(enumerate_paths(graph)) == count_from(graph.start)


# --- scenarios ----------------------------------------------------------------------------


def test_scenarios_join_intents_and_list_tools_in_order(tmp_path: Path) -> None:
    graph = diamond_chain(1)
    paths = enumerate_paths(graph)
    items = scenarios(graph, paths)
    assert [s.expected_nodes for s in items] == paths
    first = items[0]
    assert first.intent == "; ".join(f"do {n}" for n in paths[0])
    assert first.expected_actions == [f"{n}_tool" for n in paths[0]]
    assert first.id == scenario_id(paths[0]) != items[1].id

    target = tmp_path / "scenarios.jsonl"
    assert write_scenarios(items, target) == 2
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["expected_nodes"] for line in lines] == paths


def test_scenario_for_unknown_node_is_refused() -> None:
    with pytest.raises(GraphError, match="unknown node 'x'"):
        scenarios(diamond_chain(1), [["s0", "x"]])


def test_paths_document_counts_paths() -> None:
    paths = enumerate_paths(diamond_chain(2))
    document = paths_document(paths)
    assert document["count"] == 4 and document["paths"] == paths
    assert json.loads(json.dumps(document)) == document
