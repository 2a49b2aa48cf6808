"""Tests of the EDGE determinism metrics (hand-computed worked examples)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pathgrade.batch_plane.edge.determinism import (
    Action,
    canonical_action,
    convergence,
    lexical_similarity,
    node_utility,
    replay_metrics,
    structural_adherence,
    variant_metrics,
)
from pathgrade.schemas.agent_graph import AgentGraph
from pydantic import ValidationError

METRIC_KEYS = {
    "node_trajectory_consistency",
    "node_trajectory_coverage",
    "action_trajectory_consistency",
    "action_trajectory_coverage",
    "action_input_trajectory_consistency",
    "action_input_trajectory_coverage",
    "response_consistency_lexical",
}


def run(nodes: str, actions: Sequence[tuple[str, dict]] = (), response: str = "") -> dict[str, Any]:
    """A run record from a `>`-separated node path and (name, args) actions."""
    return {
        "nodes": nodes.split(">"),
        "actions": [{"name": name, "args": args} for name, args in actions],
        "response": response,
    }


def chain_graph(edges: list[tuple[str, str]], start: str, terminals: list[str]) -> AgentGraph:
    """A graph over the edge ends."""
    ids = list(dict.fromkeys([start, *[n for e in edges for n in e]]))
    return AgentGraph.model_validate(
        {
            "start": start,
            "terminals": terminals,
            "nodes": [{"id": i} for i in ids],
            "edges": [{"from": a, "to": b} for a, b in edges],
        }
    )


# --- exact replays ----------------------------------------------------------------------


def test_node_trajectory_example_from_the_brief() -> None:
    metrics = replay_metrics([run("A>B"), run("A>B>A"), run("A>B")])
    assert set(metrics) == METRIC_KEYS
    assert metrics["node_trajectory_consistency"] == pytest.approx(2 / 3)
    # every run visits the node set {A, B}
    assert metrics["node_trajectory_coverage"] == 1.0


def test_action_input_example_from_the_brief() -> None:
    runs = [
        run("a", [("KB", {"q": "X"}), ("CRM", {"p": "A"})]),
        run("a", [("KB", {"q": "X"}), ("CRM", {"p": "A"})]),
        run("a", [("KB", {"q": "Y"}), ("CRM", {"p": "B"})]),
    ]
    metrics = replay_metrics(runs)
    assert metrics["action_trajectory_consistency"] == 1.0
    assert metrics["action_trajectory_coverage"] == 1.0
    assert metrics["action_input_trajectory_consistency"] == pytest.approx(2 / 3)
    # pairwise Jaccard: (1 + 0 + 0) / 3
    assert metrics["action_input_trajectory_coverage"] == pytest.approx(1 / 3)


def test_node_coverage_is_mean_pairwise_jaccard() -> None:
    # sets {A,B}, {A,C}, {A,B,C}: J = 1/3, 2/3, 2/3 -> mean 5/9
    metrics = replay_metrics([run("A>B"), run("A>C"), run("A>B>C")])
    assert metrics["node_trajectory_coverage"] == pytest.approx(5 / 9)
    assert metrics["node_trajectory_consistency"] == pytest.approx(1 / 3)


def test_argument_order_never_matters() -> None:
    first = {"q": "X", "filters": {"b": 2, "a": [1, {"y": 0, "x": 1}]}}
    second = {"filters": {"a": [1, {"x": 1, "y": 0}], "b": 2}, "q": "X"}
    assert canonical_action(Action(name="KB", args=first)) == canonical_action(
        Action(name="KB", args=second)
    )
    metrics = replay_metrics([run("a", [("KB", first)]), run("a", [("KB", second)])])
    assert metrics["action_input_trajectory_consistency"] == 1.0


def test_action_inputs_of_different_json_types_differ() -> None:
    def key(args: dict) -> str:
        return canonical_action(Action(name="d", args=args))

    assert key({"x": {}}) != key({"x": []})
    assert key({"x": {"k": 1}}) != key({"x": [["k", 1]]})
    assert key({"x": 1}) != key({"x": True})
    assert key({"x": "1"}) != key({"x": 1})


def test_args_as_json_text_equal_args_as_objects() -> None:
    as_text = {"nodes": ["a"], "actions": [{"name": "KB", "args": '{"b": 2, "a": 1}'}]}
    as_object = run("a", [("KB", {"a": 1, "b": 2})])
    metrics = replay_metrics([as_text, as_object])
    assert metrics["action_input_trajectory_consistency"] == 1.0
    assert canonical_action(Action(name="KB", args="")) == "KB({})"
    with pytest.raises(ValidationError, match=r"actions\.0\.args"):
        replay_metrics([{"nodes": ["a"], "actions": [{"name": "KB", "args": "{oops"}]}])
    with pytest.raises(ValidationError, match=r"actions\.0\.args"):
        replay_metrics([{"nodes": ["a"], "actions": [{"name": "KB", "args": "[1]"}]}])


def test_a_single_run_agrees_with_itself() -> None:
    metrics = replay_metrics([run("A>B", [("KB", {})], "hello")])
    assert metrics == dict.fromkeys(METRIC_KEYS, 1.0)


def test_runs_without_actions_are_consistent_in_actions() -> None:
    metrics = replay_metrics([run("A"), run("B")])
    assert metrics["action_trajectory_consistency"] == 1.0
    assert metrics["action_trajectory_coverage"] == 1.0
    assert metrics["node_trajectory_coverage"] == 0.0


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ("The cat sat.", "the CAT sat", 1.0),
        ("a b", "b c", 1 / 3),
        ("refund approved", "order shipped", 0.0),
        ("", "", 1.0),
        ("", "word", 0.0),
    ],
)
def test_lexical_similarity_is_token_set_jaccard(left: str, right: str, expected: float) -> None:
    assert lexical_similarity(left, right) == pytest.approx(expected)


def test_response_consistency_is_mean_pairwise_similarity() -> None:
    runs = [run("a", response="a b"), run("a", response="b c"), run("a", response="a b")]
    # pairs: (ab, bc) 1/3, (ab, ab) 1, (bc, ab) 1/3 -> 5/9
    assert replay_metrics(runs)["response_consistency_lexical"] == pytest.approx(5 / 9)


def test_bad_runs_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="runs: at least one record"):
        replay_metrics([])
    with pytest.raises(ValidationError, match=r"1\.nodes"):
        replay_metrics([run("A"), {"actions": []}])
    with pytest.raises(ValidationError, match=r"actions\.0\.name"):
        replay_metrics([{"nodes": ["A"], "actions": [{"args": {}}]}])


runs_strategy = st.lists(
    st.builds(
        lambda nodes, args, text: {
            "nodes": nodes,
            "actions": [{"name": n, "args": {"k": a}} for n, a in zip(nodes, args, strict=False)],
            "response": text,
        },
        st.lists(st.sampled_from("ABCD"), min_size=1, max_size=5),
        st.lists(st.integers(0, 2), max_size=5),
        st.sampled_from(["yes", "no", "yes please", ""]),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(runs_strategy, st.randoms(use_true_random=False))
def test_replay_metrics_are_bounded_and_ignore_run_order(
    runs: list[dict[str, Any]], rng: random.Random
) -> None:
    metrics = replay_metrics(runs)
    assert all(0.0 <= value <= 1.0 for value in metrics.values())
    shuffled = runs[:]
    rng.shuffle(shuffled)
    assert replay_metrics(shuffled) == pytest.approx(metrics)


# --- variants -----------------------------------------------------------------------------


def test_variants_are_scored_with_the_canonical_replay_as_one_group() -> None:
    base = [run("A>B", response="yes"), run("A>B", response="yes"), run("A>C", response="no")]
    variants = [run("A>B", response="yes"), run("A>C>D", response="no")]
    metrics = variant_metrics(base, variants)
    assert set(metrics) == METRIC_KEYS
    # group: canonical A>B, then A>B and A>C>D: two of three equal the canonical
    assert metrics["node_trajectory_consistency"] == pytest.approx(2 / 3)
    # pairwise Jaccard over {A,B}, {A,B}, {A,C,D}: (1 + 1/4 + 1/4) / 3
    assert metrics["node_trajectory_coverage"] == pytest.approx(1.5 / 3)
    # (variant, replay) pairs: yes~(yes,yes,no) = 1,1,0; no~(yes,yes,no) = 0,0,1
    assert metrics["response_consistency_lexical"] == pytest.approx(3 / 6)


def test_variant_action_inputs_use_canonical_args() -> None:
    base = [run("a", [("KB", {"q": "X", "n": 1})]), run("a", [("KB", {"q": "Y", "n": 1})])]
    variants = [run("a", [("KB", {"n": 1, "q": "X"})]), run("a", [("KB", {"q": "Z", "n": 1})])]
    metrics = variant_metrics(base, variants)
    assert metrics["action_trajectory_consistency"] == 1.0
    # canonical: first seen, KB(X); the group KB(X), KB(X), KB(Z)
    assert metrics["action_input_trajectory_consistency"] == pytest.approx(2 / 3)
    assert metrics["action_input_trajectory_coverage"] == pytest.approx(1 / 3)


def test_variants_require_both_run_sets() -> None:
    with pytest.raises(ValueError, match="variant_runs"):
        variant_metrics([run("A")], [])
    with pytest.raises(ValueError, match="base_runs"):
        variant_metrics([], [run("A")])


# --- structure ----------------------------------------------------------------------------


def test_structural_adherence_counts_off_graph_transitions() -> None:
    graph = chain_graph([("a", "b"), ("b", "c")], "a", ["c"])
    result = structural_adherence(graph, [run("a>b>c"), run("a>c"), run("a>c>b")])
    # transitions: ab bc | ac | ac cb -> 2 of 5 on the graph
    assert result["structural_adherence"] == pytest.approx(2 / 5)
    assert result["transitions"] == 5
    assert result["off_graph_transitions"] == [
        {"from": "a", "to": "c", "count": 2},
        {"from": "c", "to": "b", "count": 1},
    ]


def test_structural_adherence_without_transitions_is_undecided() -> None:
    graph = chain_graph([("a", "b")], "a", ["b"])
    assert structural_adherence(graph, [run("a")])["structural_adherence"] is None


def test_convergence_and_completion_rates() -> None:
    graph = chain_graph([("s", "a"), ("s", "b"), ("a", "t"), ("b", "t"), ("a", "b")], "s", ["t"])
    records = [
        {**run("s>a>t"), "expected_nodes": ["s", "a", "t"]},  # converged
        {**run("s>a>s>a>t"), "expected_nodes": ["s", "a", "t"]},  # restart: completed only
        {**run("s>a"), "expected_nodes": ["s", "a", "t"]},  # stopped early
        {**run("s>a>t"), "expected_nodes": ["s", "b", "t"]},  # wrong branch
    ]
    result = convergence(graph, records)
    assert result["paths"] == 4
    assert result["convergence_rate"] == 0.25
    assert result["completion_rate"] == 0.5
    assert result["unreached_nodes"] == ["b"]
    assert result["unreached_edges"] == [
        {"from": "s", "to": "b"},
        {"from": "b", "to": "t"},
        {"from": "a", "to": "b"},
    ]


def test_convergence_needs_expected_nodes() -> None:
    graph = chain_graph([("s", "t")], "s", ["t"])
    with pytest.raises(ValidationError, match=r"0\.expected_nodes"):
        convergence(graph, [run("s>t")])


# --- utility ------------------------------------------------------------------------------


def test_node_utility_counts_visits_edges_and_failures() -> None:
    graph = chain_graph([("r", "kb"), ("kb", "r"), ("r", "crm"), ("crm", "r")], "r", ["r"])
    conversations = [
        {"nodes": ["r", "kb", "r", "kb", "r"], "failed_nodes": ["kb"]},
        {"walks": [["r", "kb"], ["r"]], "turns": 3, "failed_edges": [["kb", "r"]]},
        {"nodes": ["r"], "conversation_id": "c1"},
    ]
    result = node_utility(conversations, graph)
    rows = {row["node"]: row for row in result["nodes"]}
    assert rows["r"] == {"node": "r", "queries": 3, "visits": 6, "utility": 1.0, "failures": 0}
    assert rows["kb"]["queries"] == 2 and rows["kb"]["visits"] == 3
    assert rows["kb"]["utility"] == pytest.approx(2 / 3) and rows["kb"]["failures"] == 1
    assert rows["crm"]["queries"] == 0 and rows["crm"]["utility"] == 0.0
    edges = {(row["from"], row["to"]): row for row in result["edges"]}
    assert edges[("r", "kb")]["queries"] == 2 and edges[("r", "kb")]["traversals"] == 3
    # the jump from one walk to the next (kb, then r again) is not a transition
    assert edges[("kb", "r")]["traversals"] == 2 and edges[("kb", "r")]["failures"] == 1
    assert edges[("kb", "r")]["utility"] == pytest.approx(1 / 3)
    assert edges[("crm", "r")]["traversals"] == 0
    assert (result["conversations"], result["turns"]) == (3, 5)
    assert result["avg_turns_per_conversation"] == pytest.approx(5 / 3)
    assert result["avg_node_transitions_per_turn"] == pytest.approx((4 + 1 + 0) / 5)


def test_node_utility_rejects_bad_records() -> None:
    with pytest.raises(ValueError, match="conversations: at least one record"):
        node_utility([])
    with pytest.raises(ValidationError, match=r"0\.failed_edges"):
        node_utility([{"nodes": ["a"], "failed_edges": [["a"]]}])
    with pytest.raises(ValidationError, match=r"0\.walks"):
        node_utility([{"turns": 1}])
