"""EDGE over production traffic: the graph stored traces imply (`edge infer`), utility,
adherence and coverage of a declared graph (`edge traffic`), next-node advice."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.edge.recommend import recommend_next
from pathgrade.batch_plane.edge.traffic import graph_walks, infer_graph, traffic_metrics
from pathgrade.content.graph_documents import from_langgraph_json, load_graph
from pathgrade.schemas import genai
from pathgrade.schemas.agent_graph import GraphError
from pathgrade.schemas.model import Trace

from tests.support.graphs import structure
from tests.unit.detectors.test_detectors_graph_adherence import WalkTrace

TOOLS = {"test_drive": ["check_availability", "book_test_drive"], "faq": ["search_faq"]}


def turn(convention: str, index: int, *nodes: str, conversation: str = "", **root) -> Trace:
    """Turn `index` (distinct trace id and start), its nodes calling their TOOLS."""
    builder = WalkTrace(convention, f"{index:032x}", 1_000_000 * (index + 1), conversation, root)
    for node in nodes:
        span = builder.node(node)
        for tool in TOOLS.get(node, []):
            builder.tool(span, tool)
    return builder.build()


DECLARED = {  # what OpenLLMetry writes on the graph's root span: no __start__/__end__ edges
    genai.WORKFLOW_NODES: ["greetings", "test_drive", "faq"],
    genai.WORKFLOW_EDGES: ["greetings -> test_drive", "greetings -> faq"],
}
LANGGRAPH = {
    "nodes": [{"id": n} for n in ["__start__", "greetings", "test_drive", "faq", "__end__"]],
    "edges": [
        {"source": "__start__", "target": "greetings"},
        {"source": "greetings", "target": "test_drive", "conditional": True},
        {"source": "greetings", "target": "faq", "conditional": True},
        {"source": "greetings", "target": "__end__", "conditional": True},
        {"source": "test_drive", "target": "__end__"},
        {"source": "faq", "target": "__end__"},
    ],
}


def traffic(convention: str, declared: bool) -> list[Trace]:
    root = DECLARED if declared else {}
    walks = [["greetings", "test_drive"], ["greetings", "faq"], ["greetings"],
             ["greetings", "test_drive"]]  # fmt: skip
    return [turn(convention, i, *walk, **root) for i, walk in enumerate(walks)]


@pytest.mark.parametrize(
    ("convention", "declared"),
    [("openllmetry", True), ("openllmetry", False), ("openinference", False), ("genai", False)],
)
def test_inferred_graph_equals_the_langgraph_export(convention: str, declared: bool) -> None:
    inferred = infer_graph(traffic(convention, declared))
    exported = from_langgraph_json(LANGGRAPH).to_dsl()
    for node in exported["nodes"]:
        node["tools"] = TOOLS.get(node["id"], [])
    assert structure(inferred) == structure(exported)
    assert inferred["inferred_from"]["structure"] == ("declared" if declared else "observed")
    nodes = {node["id"]: node for node in inferred["nodes"]}
    assert (nodes["greetings"]["visits"], nodes["greetings"]["walks"]) == (4, 4)
    assert nodes["test_drive"]["first_seen"] == "1970-01-01T00:00:00.001Z"
    assert nodes["test_drive"]["last_seen"] == "1970-01-01T00:00:00.004Z"
    edges = {(e["from"], e["to"]): e for e in inferred["edges"]}
    assert edges[("greetings", "test_drive")]["traversals"] == 2


def test_a_declared_node_never_seen_is_kept_and_undeclared_transitions_are_listed() -> None:
    root = {genai.WORKFLOW_NODES: ["a", "b", "c"], genai.WORKFLOW_EDGES: ["a -> b", "a -> c"]}
    inferred = infer_graph([turn("openllmetry", 0, "a", "b", "c", **root)])
    assert [n["id"] for n in inferred["nodes"]] == ["a", "b", "c"]
    assert {(e["from"], e["to"]) for e in inferred["edges"]} == {("a", "b"), ("a", "c")}
    assert inferred["undeclared_transitions"] == [{"from": "b", "to": "c", "traversals": 1}]
    assert inferred["terminals"] == ["c", "b"]  # the observed end, then declared dead ends


def test_walks_beginning_at_several_nodes_get_a_start_node_like_langgraph_imports() -> None:
    inferred = infer_graph([turn("genai", 0, "a", "t"), turn("genai", 1, "b", "t")])
    assert inferred["start"] == "__start__"
    assert [(e["from"], e["to"]) for e in inferred["edges"][:2]] == [
        ("__start__", "a"),
        ("__start__", "b"),
    ]
    load_graph(inferred)  # a sound graph


def test_conversation_walks_join_the_turns_of_a_conversation() -> None:
    turns = [
        turn("genai", 0, "s", "a", conversation="c1"),
        turn("genai", 1, "b", conversation="c1"),
        turn("genai", 2, "s", "a", conversation="c2"),
    ]
    assert [w.nodes for w in graph_walks(turns, "conversation")] == [["s", "a", "b"], ["s", "a"]]
    assert [w.nodes for w in graph_walks(turns)] == [["s", "a"], ["b"], ["s", "a"]]
    inferred = infer_graph(turns, "conversation")
    assert (inferred["start"], inferred["terminals"]) == ("s", ["b", "a"])


def test_nothing_to_infer_from_is_an_error() -> None:
    with pytest.raises(GraphError, match="no graph node span"):
        infer_graph([WalkTrace("genai").build()])


def test_traffic_metrics_utility_adherence_and_coverage() -> None:
    graph = from_langgraph_json(LANGGRAPH)
    turns = [
        turn("openinference", 0, "greetings", "test_drive", conversation="c1"),
        turn("openinference", 1, "greetings", conversation="c1"),
        turn("openinference", 2, "greetings", "test_drive", "faq", conversation="c2"),
    ]
    metrics = traffic_metrics(graph, turns)
    assert (metrics["walks"], metrics["utility"]["conversations"]) == (3, 2)
    rows = {row["node"]: row for row in metrics["utility"]["nodes"]}
    assert (rows["test_drive"]["queries"], rows["test_drive"]["utility"]) == (2, 1.0)
    assert rows["faq"]["utility"] == 0.5
    assert metrics["adherence"] == {
        "walks_checked": 3, "walks_off_graph": 1, "problems": {"missing_edge": 1}}  # fmt: skip
    assert metrics["structure"]["structural_adherence"] == pytest.approx(2 / 3)
    assert metrics["coverage"]["nodes"] == 1.0
    # the imported graph's edges: greetings -> test_drive | faq (ends are terminals, not edges)
    assert metrics["coverage"]["edges"] == 0.5
    assert metrics["coverage"]["untraversed_edges"] == [{"from": "greetings", "to": "faq"}]


GRAPH = load_graph(
    {
        "start": "s",
        "terminals": ["t"],
        "nodes": [{"id": "s"}, {"id": "a", "intent": "ask about jobs"},
                  {"id": "b", "intent": "ask about pay"}, {"id": "t"}],
        "edges": [{"from": "s", "to": "a"}, {"from": "s", "to": "b", "when": "state.pay"},
                  {"from": "a", "to": "t"}, {"from": "b", "to": "t"}],
    }
)  # fmt: skip
UTILITY = {"edges": [{"from": "s", "to": "a", "traversals": 3}, {"from": "s", "to": "b",
           "traversals": 1}, {"from": "s", "to": "t", "traversals": 0},
           {"from": "a", "to": "t", "traversals": 2}]}  # fmt: skip


def test_recommendation_gives_next_nodes_with_probabilities_and_intents() -> None:
    advice = recommend_next(GRAPH, ["s"], UTILITY)
    assert [(c["node"], c["probability"]) for c in advice["next"]] == [("a", 0.75), ("b", 0.25)]
    assert (
        advice["next"][1]["intent"] == "ask about pay" and advice["next"][1]["when"] == "state.pay"
    )
    assert sum(c["probability"] for c in advice["next"]) == 1.0 and advice["traversals"] == 4
    assert recommend_next(GRAPH, ["s", "a", "t"], UTILITY)["next"] == []  # nothing seen after t
    assert recommend_next(GRAPH, ["a", "b"], UTILITY)["off_graph_steps"] == [
        {"from": "a", "to": "b"}
    ]
    with pytest.raises(ValueError, match="node 'x' is not in the graph"):
        recommend_next(GRAPH, ["s", "x"], UTILITY)
    with pytest.raises(ValueError, match="at least one node"):
        recommend_next(GRAPH, [], UTILITY)
