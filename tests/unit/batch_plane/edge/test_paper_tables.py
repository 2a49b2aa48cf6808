"""Every worked example of the EDGE paper's Tables 1 and 2 and the node utility of its
Table 4 (shared/reference/edge-paper-tables.md), through pathgrade's determinism code.

Table 2's examples list the base run first, then its variants; they are scored as one
group against the base (docs/edge.md, "Variants")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pathgrade.batch_plane.edge.determinism import (
    judged_consistency,
    node_utility,
    replay_metrics,
    variant_metrics,
)
from pathgrade.batch_plane.edge.graph import Scenario
from pathgrade.batch_plane.edge.simulation import RunManifest
from pathgrade.batch_plane.edge.store import TurnRecord, edge_metrics

KB_X, KB_Y, CRM_A, CRM_B = (
    ("KB", {"q": "X"}),
    ("KB", {"q": "Y"}),
    ("CRM", {"p": "A"}),
    (
        "CRM",
        {"p": "B"},
    ),
)


def run(nodes: str = "A>B", actions: Sequence[tuple[str, dict]] = ()) -> dict[str, Any]:
    return {"nodes": nodes.split(">"), "actions": [{"name": n, "args": a} for n, a in actions]}


def names(*tools: str) -> list[tuple[str, dict]]:
    return [(tool, {}) for tool in tools]


NODE_RUNS = [run("A>B"), run("A>B>A"), run("A>B")]
ACTION_RUNS = [run(actions=names("KB", "CRM")), run(actions=names("KB", "CRM", "KB", "CRM")),
               run(actions=names("KB", "CRM"))]  # fmt: skip
INPUT_RUNS = [run(actions=[KB_X, CRM_A]), run(actions=[KB_X, CRM_A]), run(actions=[KB_Y, CRM_B])]


# --- Table 1: exact replays ----------------------------------------------------------------


def test_table1_node_trajectory_consistency_and_coverage() -> None:
    metrics = replay_metrics(NODE_RUNS)
    assert metrics["node_trajectory_consistency"] == pytest.approx(2 / 3)
    assert metrics["node_trajectory_coverage"] == 1.0  # {A,B} three times


def test_table1_action_trajectory_consistency_and_coverage() -> None:
    metrics = replay_metrics(ACTION_RUNS)
    assert metrics["action_trajectory_consistency"] == pytest.approx(2 / 3)
    assert metrics["action_trajectory_coverage"] == 1.0  # {KB,CRM} three times


def test_table1_action_input_trajectory_consistency_and_coverage() -> None:
    metrics = replay_metrics(INPUT_RUNS)
    assert metrics["action_input_trajectory_consistency"] == pytest.approx(2 / 3)
    # the three sets share nothing (intersection empty over a union of four), yet 1/3:
    # the mean pairwise Jaccard (1 + 0 + 0) / 3 reproduces it
    assert metrics["action_input_trajectory_coverage"] == pytest.approx(1 / 3)


def test_table1_response_consistency_is_the_judges_grade() -> None:
    assert judged_consistency([4.0]) == 4  # all three runs semantically similar
    assert judged_consistency([None]) is None  # an undecided judge leaves it undecided


# --- Table 2: variants ---------------------------------------------------------------------


def test_table2_node_trajectory_consistency_and_coverage() -> None:
    metrics = variant_metrics([run("A>B")], [run("A>B")])  # base A>B, variant A>B
    assert metrics["node_trajectory_consistency"] == 1.0
    assert metrics["node_trajectory_coverage"] == 1.0


def test_table2_action_trajectory_consistency_and_coverage() -> None:
    metrics = variant_metrics(ACTION_RUNS[:1], ACTION_RUNS[1:])
    assert metrics["action_trajectory_consistency"] == pytest.approx(2 / 3)
    assert metrics["action_trajectory_coverage"] == 1.0


def test_table2_action_input_trajectory_consistency_and_coverage() -> None:
    metrics = variant_metrics(INPUT_RUNS[:1], INPUT_RUNS[1:])
    assert metrics["action_input_trajectory_consistency"] == pytest.approx(2 / 3)
    assert metrics["action_input_trajectory_coverage"] == pytest.approx(1 / 3)


def test_table2_response_consistency_is_the_mean_grade_over_variant_replay_pairs() -> None:
    assert round(judged_consistency([4.0, 4.0, 3.0]), 2) == 3.67
    assert judged_consistency([4.0, None, 3.0]) == 3.5  # an undecided pair is left out


def turn(variant: str, replay: int | None, response: str) -> TurnRecord:
    return TurnRecord(trace_id=f"{variant}{replay}", scenario_id="s", variant_id=variant,
                      replay_index=replay, attempt=0, turn=0, start_ns=0, response=response,
                      nodes=["A", "B"])  # fmt: skip


def test_table2_judged_variants_through_the_run_metrics() -> None:
    graph = {"start": "A", "terminals": ["B"], "nodes": [{"id": "A"}, {"id": "B"}],
             "edges": [{"from": "A", "to": "B"}]}  # fmt: skip
    scenario = Scenario(id="s", intent="book", expected_nodes=["A", "B"], expected_actions=[])
    manifest = RunManifest(run_id="r", graph=graph, scenarios=[scenario], replays=1,
                           variants=3, max_restarts=0, seed=0)  # fmt: skip
    turns = [turn("base", 0, "booked"), turn("v1", None, "booked"), turn("v2", None, "booked!"),
             turn("v3", None, "maybe")]  # fmt: skip
    grades = {("booked",): 4.0, ("booked", "booked"): 4.0, ("booked", "booked!"): 4.0,
              ("booked", "maybe"): 3.0}  # fmt: skip
    metrics = edge_metrics(manifest, turns, judge=lambda intent, answers: grades[tuple(answers)])
    assert metrics["replay"]["response_consistency_judged"] == 4.0
    assert round(metrics["variant"]["response_consistency_judged"], 2) == 3.67


# --- Table 4: node utility over the number of conversations --------------------------------

TABLE4 = [  # complex recruitment: node, queries, visits, utility (%)
    ("killer_questions", 540, 2172, 100.0),
    ("candidate_job_inquiry", 400, 1625, 74.07),
    ("topic_selector", 376, 1988, 69.63),
    ("general_customer_inquiries", 300, 1580, 55.56),
    ("screening_questions", 4, 9, 0.74),
    ("off_topic", 3, 7, 0.56),
]


def table4_conversations(conversations: int = 540) -> list[dict[str, Any]]:
    """`conversations` walks in which each Table 4 node is visited by its query count of
    conversations, `visits` times in all."""
    walks: list[list[str]] = [[] for _ in range(conversations)]
    for node, queries, visits, _ in TABLE4:
        for index in range(queries):
            walks[index] += [node] * (visits // queries + (index < visits % queries))
    return [{"nodes": walk} for walk in walks]


def test_table4_node_utility_is_queries_over_conversations() -> None:
    rows = {row["node"]: row for row in node_utility(table4_conversations())["nodes"]}
    for node, queries, visits, utility in TABLE4:
        assert (rows[node]["queries"], rows[node]["visits"]) == (queries, visits)
        assert round(100 * rows[node]["utility"], 2) == utility


def test_the_busiest_node_is_not_always_at_one_hundred_percent() -> None:
    conversations = [{"nodes": ["triage", "billing"]}] * 539 + [{"nodes": ["billing"]}]
    rows = {row["node"]: row for row in node_utility(conversations)["nodes"]}
    assert round(100 * rows["triage"]["utility"], 2) == 99.81  # not 100: over 540
    assert rows["billing"]["utility"] == 1.0
