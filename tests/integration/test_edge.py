"""EDGE end to end: `pathgrade edge run` on both recruitment variants into a real
`pathgrade up` stack (Tansu + chDB), then `pathgrade edge report` from the store."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pathgrade.batch_plane.edge.store import run_metrics

from pathgrade.web.endpoint import RemoteStore
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


def edge_run(process: PathgradeProcess, http_port: int, graph: Path, agent: str, run_id: str,
             *extra: str) -> int:  # fmt: skip
    """`pathgrade edge run` into the stack; waits until all its agent turns are stored."""
    out = pathgrade(
        "edge", "run", str(graph), "--agent", agent, "--otlp", f"http://127.0.0.1:{http_port}",
        "--run-id", run_id, "--seed", SEED, *extra,
    )  # fmt: skip
    turns = int(re.search(r"(\d+) agent turns", out).group(1))
    wait_until(lambda: agent_turns_stored(process, run_id) == turns, timeout_s=30)
    return turns


def test_constrained_recruitment_is_more_deterministic(
    stack: tuple[PathgradeProcess, int], tmp_path: Path
) -> None:
    process, http_port = stack
    scenarios = tmp_path / "scenarios.jsonl"
    assert pathgrade("edge", "paths", str(EXAMPLE / "graph_constrained.json"), "--out",
                     str(scenarios)).startswith("6 paths")  # fmt: skip
    consistency = {}
    for variant in ("constrained", "baseline"):
        run_id = f"edge-test-{variant}"
        turns = edge_run(
            process, http_port, EXAMPLE / f"graph_{variant}.json",
            f"{EXAMPLE / 'agent.py'}:{variant}", run_id, "--scenarios", str(scenarios),
            "--replays", "4", "--variants", "2", "--max-restarts", "2",
        )  # fmt: skip
        report = tmp_path / f"{variant}.html"
        with OpenAIStandIn() as judge:  # judged 1-4 response consistency per scenario
            printed = pathgrade("edge", "report", run_id, "--data-dir", str(process.data_dir),
                                "--out", str(report), "--judge-url", judge.url,
                                "--judge-model", "judge-m")  # fmt: skip
            assert 0 < len(judge.requests) <= 6  # per scenario; identical inputs hit the cache
        assert "node trajectory consistency" in printed
        html = report.read_text()
        assert "response_consistency_judged" in html and "not judged" not in html
        assert "<svg" in html and "EDGE report" in html and f"Seed {SEED}" in html
        assert report.with_suffix(".svg").read_text().startswith("<svg")
        assert report.with_suffix(".png").read_bytes().startswith(PNG_SIGNATURE)
        metrics = run_metrics(RemoteStore(_query_url(process)), run_id)
        assert metrics["counts"] == {
            "scenarios": 6, "conversations": 36,
            "attempts": metrics["counts"]["attempts"], "turns": turns,
        }  # fmt: skip
        assert metrics["structure"]["structural_adherence"] == 1.0
        consistency[variant] = metrics["replay"]["node_trajectory_consistency"]
    assert consistency["constrained"] > consistency["baseline"], consistency


def test_car_dealer_langgraph_agent_spans_reach_the_store(
    stack: tuple[PathgradeProcess, int], tmp_path: Path
) -> None:
    process, http_port = stack
    run_id = "edge-test-car-dealer"
    dealer = EXAMPLES / "car_dealer"
    turns = edge_run(process, http_port, dealer / "graph.json", f"{dealer / 'agent.py'}:stochastic",
                     run_id, "--replays", "2", "--variants", "1")  # fmt: skip
    spans = process.sql(
        "SELECT GenAIOperation, GenAIAgentName, GenAIToolName, count() FROM spans FINAL "
        "WHERE TraceId IN (SELECT TraceId FROM spans FINAL WHERE EvalRunId = "
        f"'{run_id}' AND ParentSpanId = '') GROUP BY 1, 2, 3"
    ).rows
    kinds = {(operation, agent or tool) for operation, agent, tool, _ in spans}
    assert {("invoke_agent", "car-dealer-agent"), ("invoke_agent", "greetings"),
            ("chat", ""), ("execute_tool", "book_test_drive")} <= kinds  # fmt: skip
    metrics = run_metrics(RemoteStore(_query_url(process)), run_id)
    assert metrics["counts"]["scenarios"] == 4 and metrics["counts"]["turns"] == turns
    assert metrics["structure"]["structural_adherence"] == 1.0


def _query_url(process: PathgradeProcess) -> str:
    import json

    assert process.data_dir is not None
    return json.loads((process.data_dir / "stack.json").read_text())["query_url"]
