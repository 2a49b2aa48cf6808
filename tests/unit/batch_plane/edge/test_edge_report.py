"""EDGE metrics from stored turns (the EDGE store, without a store) and the HTML/SVG/PNG report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pathgrade.batch_plane.edge.graph import Scenario
from pathgrade.batch_plane.edge.report import (
    edge_width,
    graph_svg,
    node_radius,
    table3,
    table3_text,
    write_report,
)
from pathgrade.batch_plane.edge.simulation import RunManifest
from pathgrade.batch_plane.edge.store import (
    EdgeRunNotFound,
    TurnRecord,
    edge_metrics,
    response_text,
    utility_records,
)
from pathgrade.content.graph_documents import load_graph

GRAPH = load_graph(
    {
        "start": "s",
        "terminals": ["t"],
        "nodes": [{"id": "s"}, {"id": "a"}, {"id": "b<&>"}, {"id": "t"}],
        "edges": [{"from": "s", "to": "a"}, {"from": "s", "to": "b<&>"},
                  {"from": "a", "to": "t"}, {"from": "b<&>", "to": "t"}],
    }
)  # fmt: skip
PATH = Scenario(id="p", intent="", expected_nodes=["s", "a", "t"], expected_actions=[])
MANIFEST = RunManifest(run_id="run-1", graph=GRAPH.to_dsl(), scenarios=[PATH], replays=2,
                       variants=1, max_restarts=1, seed=7, agent="agent.py:f")  # fmt: skip


def turn(variant: str, replay: int | None, attempt: int, index: int, nodes: list[str],
         response: str = "ok") -> TurnRecord:  # fmt: skip
    return TurnRecord(
        trace_id=f"{variant}{replay}{attempt}{index}", scenario_id="p", variant_id=variant,
        replay_index=replay, attempt=attempt, turn=index, start_ns=index, response=response,
        nodes=nodes, actions=[{"name": f"tool_{n}", "args": "{}"} for n in nodes],
    )  # fmt: skip


TURNS = [
    # replay 0 follows the path in two turns; replay 1 leaves it, restarts and completes.
    turn("base", 0, 0, 0, ["s", "a"]), turn("base", 0, 0, 1, ["t"], "booked"),
    turn("base", 1, 0, 0, ["s", "b<&>"]),
    turn("base", 1, 1, 0, ["s", "a"]), turn("base", 1, 1, 1, ["t"], "booked"),
    turn("v1-rude", None, 0, 0, ["s", "a"]), turn("v1-rude", None, 0, 1, ["t"], "booked"),
]  # fmt: skip


def test_response_text_reads_genai_output_messages() -> None:
    messages = '[{"role": "assistant", "parts": [{"type": "text", "content": "hi"}]}]'
    assert response_text(messages) == "hi"
    assert response_text("") == ""
    assert response_text("plain text") == "plain text"


def test_edge_metrics_score_runs_attempts_and_utility() -> None:
    metrics = edge_metrics(MANIFEST, TURNS)
    assert metrics["counts"] == {"scenarios": 1, "conversations": 3, "attempts": 4, "turns": 7}
    assert metrics["replay"]["node_trajectory_consistency"] == 0.5  # the restart differs
    assert metrics["variant"]["node_trajectory_consistency"] == 1.0  # = the first replay
    assert metrics["structure"]["structural_adherence"] == 1.0  # restarts are not transitions
    assert metrics["convergence"]["convergence_rate"] == pytest.approx(2 / 3)
    assert metrics["convergence"]["completion_rate"] == 1.0
    nodes = {row["node"]: row for row in metrics["utility"]["nodes"]}
    # a query is one conversation (Table 4): s is visited by all 3, 4 times (one restart)
    assert (nodes["s"]["queries"], nodes["s"]["visits"], nodes["s"]["utility"]) == (3, 4, 1.0)
    assert nodes["b<&>"]["failures"] == 1 and nodes["a"]["failures"] == 0
    assert nodes["b<&>"]["utility"] == pytest.approx(1 / 3)
    edges = {(row["from"], row["to"]): row for row in metrics["utility"]["edges"]}
    assert edges[("s", "b<&>")]["failures"] == 1 and edges[("a", "t")]["queries"] == 3
    assert metrics["utility"]["avg_turns_per_conversation"] == pytest.approx(7 / 3)


def test_judged_response_consistency_hook() -> None:
    seen: list[list[str]] = []
    metrics = edge_metrics(
        MANIFEST, TURNS, judge=lambda intent, responses: seen.append(list(responses)) or 4.0
    )
    # the replays together, then the variant against each replay
    assert seen == [["booked", "booked"], ["booked", "booked"], ["booked", "booked"]]
    assert metrics["replay"]["response_consistency_judged"] == 4.0
    assert metrics["variant"]["response_consistency_judged"] == 4.0
    assert "response_consistency_judged" not in edge_metrics(MANIFEST, TURNS)["replay"]


def test_no_turns_is_an_error_naming_the_run() -> None:
    with pytest.raises(EdgeRunNotFound, match="run-1"):
        edge_metrics(MANIFEST, [])


def test_utility_records_are_conversations_with_a_walk_per_attempt() -> None:
    conversation = [turn("base", 0, 0, 0, ["s", "b<&>"]), turn("base", 0, 1, 0, ["s", "a"]),
                    turn("base", 0, 1, 1, ["t"])]  # fmt: skip
    (record,) = utility_records({("p", "base", 0): conversation}, {"p": ["s", "a", "t"]})
    assert record == {"walks": [["s", "b<&>"], ["s", "a", "t"]], "turns": 3,
                      "failed_nodes": ["b<&>"], "failed_edges": [("s", "b<&>")]}  # fmt: skip


def _svg_sizes(svg: str) -> tuple[dict[str, float], dict[str, float]]:
    radii = {m[1]: float(m[0]) for m in re.findall(r'r="([\d.]+)"[^>]*><title>([^:]+):', svg)}
    widths = {m[1]: float(m[0]) for m in re.findall(
        r'stroke-width="([\d.]+)"[^>]*><title>([^:]+):', svg)}  # fmt: skip
    return radii, widths


def test_graph_svg_sizes_nodes_and_edges_by_utility_and_escapes_names() -> None:
    utility = {"nodes": [{"node": "s", "utility": 1.0}, {"node": "a", "utility": 0.5}],
               "edges": [{"from": "s", "to": "a", "utility": 1.0}]}  # fmt: skip
    svg = graph_svg(GRAPH, utility)
    radii, widths = _svg_sizes(svg)
    assert radii == {"s": node_radius(1.0), "a": node_radius(0.5), "b&lt;&amp;&gt;": node_radius(0),
                     "t": node_radius(0)}  # fmt: skip
    assert widths["s -&gt; a"] == pytest.approx(edge_width(1.0), abs=0.01)
    assert widths["a -&gt; t"] == pytest.approx(edge_width(0.0), abs=0.01)
    assert "b<&>" not in svg


def test_write_report_writes_self_contained_html_svg_and_png(tmp_path: Path) -> None:
    metrics = edge_metrics(MANIFEST, TURNS)
    metrics["manifest"] = MANIFEST.model_dump(exclude={"graph", "scenarios"})
    paths = write_report([(metrics, GRAPH)], tmp_path / "out" / "report.html")
    html_path, svg_path, png_path = paths
    assert svg_path.name == "report.svg"
    html = html_path.read_text()
    assert svg_path.read_text() in html  # the same picture, inline
    assert png_path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched from outside
    assert "Seed 7" in html and "3 conversations" in html and "not judged" in html
    assert "node_trajectory_consistency" in html and "b&lt;&amp;&gt;" in html
    assert "Node Trajectory Consistency (%)" in html  # the Table 3 summary


def judged_run(run_id: str, grade: float) -> dict:
    metrics = edge_metrics(
        MANIFEST.model_copy(update={"run_id": run_id}), TURNS, judge=lambda i, r: grade
    )
    metrics["manifest"] = {"agent": f"agent-{run_id}"}
    return metrics


def test_table3_puts_several_runs_side_by_side_with_the_judged_consistency(
    tmp_path: Path,
) -> None:
    runs = [judged_run("a", 4.0), judged_run("b", 2.0)]
    rows = {row[0]: row[1:] for row in table3(runs)}
    assert rows["Node Trajectory Consistency (%)"] == [50.0, 50.0]
    assert rows["Node Trajectory Coverage (%)"] == [75.0, 75.0]  # {s,a,t} vs {s,b,a,t}
    assert rows["Response Consistency (1-4)"] == [4.0, 2.0]
    assert rows["Average Number of Turns"] == [2.33, 2.33]
    text = table3_text(runs)
    assert text.splitlines()[0].split() == ["metric", "a", "(agent-a)", "b", "(agent-b)"]
    assert "Response Consistency (1-4)" in text and "4.00" in text and "2.00" in text
    unjudged = edge_metrics(MANIFEST, TURNS)
    assert "n/a" in table3_text([unjudged])
    paths = write_report([(runs[0], GRAPH), (runs[1], GRAPH)], tmp_path / "two.html")
    assert [p.name for p in paths] == ["two.html", "two-a.svg", "two-a.png", "two-b.svg",
                                       "two-b.png"]  # fmt: skip
    html = paths[0].read_text()
    assert "Run a" in html and "Run b" in html and "4.00 (exact replays)" in html


def test_rubric_consistency_judge_grades_on_the_edge_scale_and_fails_undecided() -> None:
    from pathgrade.batch_plane.edge.store import rubric_consistency_judge
    from pathgrade.batch_plane.scoring.judge import Judge
    from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint

    from tests.support.openai_standin import OpenAIStandIn, Reply

    with OpenAIStandIn() as llm:
        grade = rubric_consistency_judge(Judge(JudgeEndpoint(llm.url, "m", max_attempts=1)))
        llm.enqueue(Reply(content={"score": 3, "explanation": "same substance"}))
        assert grade("book a test drive", ["Booked for 3pm.", "Booked at 3 pm."]) == 3.0
        prompt = llm.requests[0]["messages"][0]["content"]
        assert "book a test drive" in prompt and "Booked at 3 pm." in prompt
        llm.enqueue(Reply(content="not json"))
        assert grade("book a test drive", ["a", "b"]) is None  # undecided, never a pass
