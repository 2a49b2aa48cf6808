"""EDGE end to end: `pathgrade edge run` on both recruitment variants into a real
`pathgrade up` stack (Tansu + chDB), then `pathgrade edge report` from the store."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from pathgrade.batch_plane.edge.store import run_metrics

from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.support.openai_standin import OpenAIStandIn

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "recruitment"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SEED = "7"


def pathgrade(*args: str) -> str:
    """Run `pathgrade <args>` to completion; its stdout (fails on a non-zero exit)."""
    done = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PathgradeProcess, int]]:
    data_dir = tmp_path_factory.mktemp("edge")
    process, _, http_port = start_stack(data_dir, "--capture-tools", "*", "--capture-messages")
    yield process, http_port
    assert process.terminate() == 0, process.output


def agent_turns_stored(process: PathgradeProcess, run_id: str) -> int:
    return process.scalar(
        "SELECT count() FROM spans FINAL WHERE ParentSpanId = '' "
        f"AND EvalRunId = '{run_id}' AND SpanName != 'pathgrade.edge.run'"
    )


def stored_attempts(process: PathgradeProcess, run_id: str) -> int:
    """The run's attempts counted by hand: distinct (item, variant, replay, attempt) of its
    agent turns' root spans."""
    return process.scalar(
        "SELECT uniqExact(tuple(EvalDatasetItemId, EvalVariantId, toString(EvalReplayIndex), "
        "SpanAttributes['pathgrade.edge.attempt'])) FROM spans FINAL WHERE ParentSpanId = '' "
        f"AND EvalRunId = '{run_id}' AND SpanName != 'pathgrade.edge.run'"
    )


def edge_run_output(process: PathgradeProcess, http_port: int, graph: Path, agent: str,
                    run_id: str, *extra: str) -> str:  # fmt: skip
    """`pathgrade edge run` into the stack; waits until all its agent turns are stored and
    returns what it printed."""
    out = pathgrade(
        "edge", "run", str(graph), "--agent", agent, "--otlp", f"http://127.0.0.1:{http_port}",
        "--run-id", run_id, "--seed", SEED, *extra,
    )  # fmt: skip
    turns = int(re.search(r"(\d+) agent turns", out).group(1))
    wait_until(lambda: agent_turns_stored(process, run_id) == turns, timeout_s=30)
    return out


def consistency_grade(request: dict) -> dict:
    """The stand-in judge's script: 4 when every answer in the prompt is the same, else 2
    (a bad grade), so both good and bad verdicts reach the report."""
    prompt = request["messages"][0]["content"]
    answers = json.loads(prompt.split("Answers, one per run:\n", 1)[1].split("\nReply with")[0])
    return {"score": 4 if len(set(answers)) == 1 else 2, "explanation": "scripted"}


def test_constrained_recruitment_is_more_deterministic(
    stack: tuple[PathgradeProcess, int], tmp_path: Path
) -> None:
    process, http_port = stack
    scenarios = tmp_path / "scenarios.jsonl"
    printed_paths = pathgrade("edge", "paths", str(EXAMPLE / "graph_constrained.json"),
                              "--out", str(scenarios))  # fmt: skip
    assert printed_paths.splitlines()[-1].startswith("6 paths")
    paths = [json.loads(line)["expected_nodes"] for line in scenarios.read_text().splitlines()]
    assert printed_paths.splitlines()[:-1] == [" > ".join(path) for path in paths]
    consistency = {}
    all_grades: set[int] = set()
    for variant in ("constrained", "baseline"):
        run_id = f"edge-test-{variant}"
        out = edge_run_output(
            process, http_port, EXAMPLE / f"graph_{variant}.json",
            f"{EXAMPLE / 'agent.py'}:{variant}", run_id, "--scenarios", str(scenarios),
            "--replays", "4", "--variants", "2", "--max-restarts", "2",
        )  # fmt: skip
        turns = int(re.search(r"(\d+) agent turns", out).group(1))
        converged = int(re.search(r"(\d+) converged \(no restart\)", out).group(1))
        report = tmp_path / f"{variant}.html"
        with OpenAIStandIn(answer=consistency_grade) as judge:  # judged 1-4 consistency
            printed = pathgrade("edge", "report", run_id, "--data-dir", str(process.data_dir),
                                "--out", str(report), "--judge-url", judge.url,
                                "--judge-model", "judge-m")  # fmt: skip
            # per scenario: the replays, then each (variant, replay) pair; repeats are cached
            assert 0 < len(judge.requests) <= 6 * (1 + 2 * 4)
            all_grades |= {consistency_grade(r)["score"] for r in judge.requests}
        judged_row = next(x for x in printed.splitlines() if x.startswith("Response Consistency"))
        assert "n/a" not in judged_row and "node trajectory consistency" in printed
        # the count `edge run` printed is the report's convergence: one definition
        assert f"({converged} of 36 conversations converged)" in printed
        html = report.read_text()
        assert "response_consistency_judged" in html and "not judged" not in html
        assert "<svg" in html and "EDGE report" in html and f"Seed {SEED}" in html
        svg = report.with_suffix(".svg").read_text()
        assert svg.startswith("<svg") and svg in html
        assert report.with_suffix(".png").read_bytes().startswith(PNG_SIGNATURE)
        # the agent around the graph calls each node agent as a sub-agent, as the run page draws
        assert re.findall(r'class="node agent" data-node="([^"]*)"', svg) == ["recruitment-agent"]
        called = re.findall(r'data-handoff="([^"]*)" data-edge="recruitment-agent -&gt; ', svg)
        assert called and set(called) == {"delegation"} and "transfer" not in svg
        assert "<h3>Hand-offs" in html and "<td>recruitment-agent</td>" in html
        metrics = run_metrics(process.owner(), run_id)
        assert metrics["counts"] == {
            "scenarios": 6, "conversations": 36,
            "attempts": stored_attempts(process, run_id), "turns": turns,
        }  # fmt: skip
        # a conversation that did not converge at once was restarted at least once
        assert 36 + (36 - converged) <= metrics["counts"]["attempts"] <= 36 * 3
        assert round(metrics["convergence"]["convergence_rate"] * 36) == converged
        assert metrics["structure"]["structural_adherence"] == 1.0
        consistency[variant] = metrics["replay"]["node_trajectory_consistency"]
    assert consistency["constrained"] > consistency["baseline"], consistency
    assert all_grades == {2, 4}  # the scripted judge gave good and bad verdicts
    both = pathgrade("edge", "report", "edge-test-constrained", "edge-test-baseline",
                     "--data-dir", str(process.data_dir), "--out",
                     str(tmp_path / "both.html"))  # fmt: skip
    header = both.splitlines()[0].split()
    assert header[:2] == ["metric", "edge-test-constrained"] and "edge-test-baseline" in header
    assert "Node Trajectory Consistency (%)" in both and "n/a" in both  # no judge this time


def test_recommend_on_the_recruitment_run_matches_counts_by_hand(
    stack: tuple[PathgradeProcess, int],
) -> None:
    process, http_port = stack
    run_id = "edge-test-recommend"
    edge_run_output(process, http_port, EXAMPLE / "graph_baseline.json",
                    f"{EXAMPLE / 'agent.py'}:baseline", run_id, "--replays", "2",
                    "--variants", "0", "--max-restarts", "1")  # fmt: skip
    advice = json.loads(pathgrade(
        "edge", "recommend", "--graph", str(EXAMPLE / "graph_baseline.json"), "--path",
        "topic_selector,job_inquiry", "--from-run", run_id, "--data-dir", str(process.data_dir),
        "--format", "json",
    ))  # fmt: skip
    # by hand: each attempt's nodes in order (root span's attempt and turn, node spans' agent
    # names by start), then every step out of job_inquiry within an attempt
    rows = process.sql(
        "SELECT r.EvalDatasetItemId, r.EvalReplayIndex, r.SpanAttributes['pathgrade.edge.attempt'],"
        " toUInt32OrZero(r.SpanAttributes['pathgrade.edge.turn']) AS turn, n.GenAIAgentName "
        "FROM spans AS n FINAL JOIN (SELECT * FROM spans FINAL WHERE ParentSpanId = '' AND "
        f"EvalRunId = '{run_id}') AS r ON n.TraceId = r.TraceId WHERE n.ParentSpanId != '' "
        "AND n.GenAIOperation = 'invoke_agent' ORDER BY 1, 2, 3, turn, n.Timestamp"
    ).rows
    walks: dict[tuple, list[str]] = {}
    for item, replay, attempt, _, node in rows:
        walks.setdefault((item, replay, attempt), []).append(node)
    counts = Counter(b for walk in walks.values() for a, b in pairwise(walk) if a == "job_inquiry")
    assert counts, "the run never left job_inquiry: nothing to recommend"
    assert {c["node"]: c["traversals"] for c in advice["next"]} == dict(counts)
    total = sum(counts.values())
    for candidate in advice["next"]:
        assert candidate["probability"] == pytest.approx(counts[candidate["node"]] / total)
    assert sum(c["probability"] for c in advice["next"]) == pytest.approx(1.0)
    assert advice["next"][0]["intent"]  # the node's intent: what a user says to go there


def test_stored_conversations_replayed_report_the_table1_metrics(
    stack: tuple[PathgradeProcess, int], tmp_path: Path
) -> None:
    process, _ = stack
    first_attempts = ("EvalRunId = 'edge-test-constrained' AND EvalVariantId = 'base' AND "
                      "EvalReplayIndex = 0 AND SpanAttributes['pathgrade.edge.attempt'] = '0' "
                      "AND ParentSpanId = ''")  # fmt: skip
    data_dir = ("--data-dir", str(process.data_dir))
    made = pathgrade("dataset", "from-traces", "benchmark/recruitment", "--where",
                     first_attempts, "--kind", "benchmark", *data_dir)  # fmt: skip
    items = int(re.search(r"added (\d+) traces", made).group(1))
    replayed = pathgrade("replay", "conversations", "--dataset", "benchmark/recruitment",
                         "--agent", f"{EXAMPLE / 'agent.py'}:constrained", "--repeats", "3",
                         "--run-id", "replay-recruitment", *data_dir)  # fmt: skip
    assert f"{items * 3} attempts, {items * 3} traces" in replayed
    printed = pathgrade("edge", "report", "replay-recruitment", "--graph",
                        str(EXAMPLE / "graph_constrained.json"), "--out",
                        str(tmp_path / "replayed.html"), *data_dir)  # fmt: skip
    # the agent's draws are seeded per turn, so three replays of a conversation agree
    assert "run replay-recruitment: node trajectory consistency 1.000 (replays)" in printed
    html = (tmp_path / "replayed.html").read_text()
    assert "6 scenarios, 3 exact replays" in html and "stored conversations" in html


def test_car_dealer_langgraph_agent_spans_reach_the_store(
    stack: tuple[PathgradeProcess, int], tmp_path: Path
) -> None:
    process, http_port = stack
    run_id = "edge-test-car-dealer"
    dealer = EXAMPLES / "car_dealer"
    out = edge_run_output(process, http_port, dealer / "graph.json",
                          f"{dealer / 'agent.py'}:stochastic", run_id, "--replays", "2",
                          "--variants", "1")  # fmt: skip
    turns = int(re.search(r"(\d+) agent turns", out).group(1))
    spans = process.sql(
        "SELECT GenAIOperation, GenAIAgentName, GenAIToolName, count() FROM spans FINAL "
        "WHERE TraceId IN (SELECT TraceId FROM spans FINAL WHERE EvalRunId = "
        f"'{run_id}' AND ParentSpanId = '') GROUP BY 1, 2, 3"
    ).rows
    kinds = {(operation, agent or tool) for operation, agent, tool, _ in spans}
    assert {("invoke_agent", "car-dealer-agent"), ("invoke_agent", "greetings"),
            ("chat", ""), ("execute_tool", "book_test_drive")} <= kinds  # fmt: skip
    metrics = run_metrics(process.owner(), run_id)
    assert metrics["counts"]["scenarios"] == 4 and metrics["counts"]["turns"] == turns
    assert metrics["structure"]["structural_adherence"] == 1.0
