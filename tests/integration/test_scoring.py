"""`pathgrade score --run`, `pathgrade gate` and `pathgrade scorer` against a real
`pathgrade up` stack: spans sent with the OTel SDK and the official OTLP/HTTP exporter,
judged by the local OpenAI stand-in, whose default script fails half the prompts and
answers some malformed first (tests/support/openai_standin.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.schemas import genai
from pathgrade.schemas.sampled import SampledTrace
from pathgrade.schemas.topics import SAMPLED_TOPIC

from pathgrade.stack.broker import LocalBroker
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.support.openai_standin import OpenAIStandIn

pytestmark = pytest.mark.integration

RUN_ID = "run-scoring-1"
SUITE = """
suite: support
risk_tier: medium
datasets: [{name: golden/support-v1}]
judge: {model: gpt-4o-mini, rubric_version: task_completion@1, calibration_set: none}
metrics:
  - {id: claimed_actions, kind: deterministic, threshold: 1.0}
  - {id: task_completion, threshold: 0.8}
  - {id: faithfulness, threshold: 0.8}
slices: [intent]
"""


def send_run(http_port: int, traces: int, run_id: str = RUN_ID) -> None:
    """`traces` agent turns of run `run_id`; the last one claims a refund it never made."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test_scoring")
    for index in range(traces):
        claim = "I have refunded your order." if index == traces - 1 else f"Order {index} ok."
        with tracer.start_as_current_span("invoke_agent support") as root:
            root.set_attributes({
                genai.OPERATION_NAME: "invoke_agent", genai.AGENT_NAME: "support",
                "pathgrade.run.id": run_id, "pathgrade.dataset.item_id": f"item-{index}",
                "intent": "status",
                genai.INPUT_MESSAGES: json.dumps(
                    [{"role": "user", "content": f"order {index} ({run_id})?"}]
                ),
                genai.OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "content": claim}]),
            })  # fmt: skip
            with tracer.start_as_current_span("execute_tool lookup_order") as tool:
                tool.set_attributes({
                    genai.OPERATION_NAME: "execute_tool", genai.TOOL_NAME: "lookup_order",
                    genai.TOOL_CALL_ARGUMENTS: json.dumps({"order": index}),
                    genai.TOOL_CALL_RESULT: json.dumps({"status": "shipped"}),
                })  # fmt: skip
    provider.shutdown()


HIGH_TIER = {"claimed_actions", "task_completion", "faithfulness", "unsupported_claims"}


def scored_metrics(stack: PathgradeProcess, trace_id: str) -> set[str]:
    query = f"SELECT DISTINCT Metric FROM scores FINAL WHERE TraceId = '{trace_id}'"
    return {row[0] for row in stack.sql(query).rows}


def stored_run_traces(
    stack: PathgradeProcess, expected: int, run_id: str = RUN_ID
) -> list[str] | None:
    """The trace ids of `run_id` once all `expected` traces are stored."""
    query = f"SELECT DISTINCT TraceId FROM spans FINAL WHERE EvalRunId = '{run_id}' ORDER BY 1"
    ids = [row[0] for row in stack.sql(query).rows]
    return ids if len(ids) == expected else None


def cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """`pathgrade ARGS --data-dir DATA_DIR`."""
    return subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def score(
    data_dir: Path, suite: Path, url: str, *extra: str, run_id: str = RUN_ID
) -> subprocess.CompletedProcess:
    return cli(
        data_dir, "score", "--run", run_id, "--suite", str(suite), "--judge-url", url, *extra
    )


def normalised_sum(judge: OpenAIStandIn, rubric_id: str) -> float:
    """The sum of the verdicts the stand-in last gave on `rubric_id`, normalised as the
    scores table holds them."""
    scale = load_rubric(rubric_id).scale
    return sum(scale.normalise(v["score"]) for v in judge.scripted.verdicts(rubric_id))


def failing_verdicts(judge: OpenAIStandIn) -> int:
    """How many prompts the stand-in last answered with a failing verdict."""
    return sum(
        verdict["score"] < load_rubric(json.loads(key)[0]).scale.pass_at
        for key, verdict in judge.scripted.final.items()
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PathgradeProcess, Path, int]]:
    """A `pathgrade up` keeping tool arguments and messages, and the `intent` attribute's
    values the suite slices by (allowed: any other value travels as its mark):
    (process, data dir, HTTP port)."""
    data_dir = tmp_path_factory.mktemp("scoring") / "data"
    process, _, http_port = start_stack(
        data_dir, "--capture-tools", "*", "--capture-messages", "--allow-keys", "intent"
    )
    yield process, data_dir, http_port
    assert process.terminate() == 0, process.output


def test_score_run_writes_the_judges_verdicts_and_a_rerun_hits_the_cache(
    stack: tuple[PathgradeProcess, Path, int], tmp_path: Path
) -> None:
    process, data_dir, http_port = stack
    send_run(http_port, traces=3)
    wait_until(lambda: stored_run_traces(process, 3))
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    with OpenAIStandIn() as judge:
        first = score(data_dir, suite, judge.url)
        assert first.returncode == 0, first.stderr
        assert "scored 3 of 3 traces (9 scores)" in first.stdout
        assert "judge: 6 calls" in first.stdout
        assert "task_completion: judge gpt-4o-mini with task_completion@1 is uncalibrated" in (
            first.stdout
        )
        assert "scoring run run-scoring-1: 3/3 traces (100%)" in first.stderr  # plain: no TTY
        # Six prompts: the script answered two of them malformed first, and they were asked again.
        assert len(judge.requests) == 8

        again = score(data_dir, suite, judge.url)
        assert again.returncode == 0, again.stderr
        assert "judge: 0 calls" in again.stdout and len(judge.requests) == 8

        capped = score(data_dir, suite, judge.url, "--judge-model", "gpt-4o", "--budget-calls", "1")
        assert capped.returncode == 0, capped.stderr
        assert "of 3 traces" in capped.stdout and "stopped: judge budget reached" in capped.stdout
    rows = process.sql(
        "SELECT Metric, count(), sum(Value), countIf(Label = 'fail'), any(JudgeModel), "
        f"any(Slices['intent']) FROM scores FINAL WHERE RunId = '{RUN_ID}' "
        "AND JudgeModel != 'gpt-4o' GROUP BY Metric ORDER BY Metric"
    ).rows
    assert rows[0] == ["claimed_actions", 3, 2.0, 1, "", "status"]  # the refund claim: PG116
    # Each judged score is the stand-in's verdict, normalised: three of six prompts passed.
    assert [row[:2] for row in rows[1:]] == [["faithfulness", 3], ["task_completion", 3]]
    assert [row[2] for row in rows[1:]] == pytest.approx(
        [normalised_sum(judge, "faithfulness"), normalised_sum(judge, "task_completion")]
    )
    assert sum(row[2] for row in rows[1:]) == pytest.approx(3.0)
    assert sum(row[3] for row in rows[1:]) == failing_verdicts(judge) == 3
    assert process.sql(
        "SELECT count(), sum(Attempts) FROM judge_calls FINAL WHERE Model = 'gpt-4o-mini'"
    ).rows == [[6, 8]]  # every retry counted against its call

    with OpenAIStandIn(answer=lambda request: '{"score": ') as broken:
        failed = score(data_dir, suite, broken.url, "--judge-model", "gpt-4o-broken")
    assert failed.returncode == 1, failed.stdout
    assert "gave no valid" in failed.stderr and "after 5 attempts" in failed.stderr
    assert "answer is not JSON" in failed.stderr
    assert len(broken.requests) >= 5  # one verdict's five attempts at least
    assert (
        process.scalar("SELECT count() FROM scores FINAL WHERE JudgeModel = 'gpt-4o-broken'") == 0
    )  # nothing made up from a malformed answer


GATE_SUITE = """
suite: support-judged
risk_tier: low
datasets: [{{name: golden/support-v1}}]
judge: {{model: gpt-4o-mini, rubric_version: task_completion@1, calibration_set: labels/v1}}
metrics:
  - {{id: task_completion, threshold: {threshold}, max_regression: null}}
"""


def test_a_gate_fails_on_the_judges_low_scores(
    stack: tuple[PathgradeProcess, Path, int], tmp_path: Path
) -> None:
    """Two runs of four traces scored by the stand-in's script (two prompts in four fail):
    a calibrated judge metric at mean 0.5 fails a gate asking 0.75 on its threshold, and
    passes one asking 0.4."""
    process, data_dir, http_port = stack
    runs = ("run-gate-baseline", "run-gate-candidate")
    for run_id in runs:
        send_run(http_port, traces=4, run_id=run_id)
        wait_until(lambda run_id=run_id: stored_run_traces(process, 4, run_id))
    labels = tmp_path / "labels.jsonl"
    items = [
        {"item_id": f"l{n}", "label": label, "input": {"question": f"q{n}", "answer": "a",
                                                      "tool_calls": []}}
        for n, label in enumerate(("pass", "fail"))
    ]  # fmt: skip
    labels.write_text("\n".join(json.dumps(item) for item in items))
    strict, lenient = tmp_path / "strict.yaml", tmp_path / "lenient.yaml"
    strict.write_text(GATE_SUITE.format(threshold=0.75))
    lenient.write_text(GATE_SUITE.format(threshold=0.4))
    with OpenAIStandIn() as judge:
        calibrated = cli(data_dir, "judge", "calibrate", "--labels", str(labels),
                         "--judge-url", judge.url, "--judge-model", "gpt-4o-mini",
                         "--rubric", "task_completion@1")  # fmt: skip
        assert calibrated.returncode == 0, calibrated.stderr
        for run_id in runs:
            scored = score(data_dir, strict, judge.url, run_id=run_id)
            assert scored.returncode == 0, scored.stderr
            assert "scored 4 of 4 traces (4 scores)" in scored.stdout
    means = process.sql(
        "SELECT RunId, avg(Value), countIf(Label = 'fail') FROM scores FINAL "
        f"WHERE RunId IN {runs} AND Metric = 'task_completion' GROUP BY RunId ORDER BY RunId"
    ).rows
    assert means == [[runs[0], 0.5, 2], [runs[1], 0.5, 2]]

    gate = ("gate", "--candidate", runs[1], "--baseline", runs[0], "--format", "json",
            "--no-record")  # fmt: skip
    failed = cli(data_dir, *gate[:1], str(strict), *gate[1:])
    assert failed.returncode == 1, failed.stderr
    (row,) = [r for r in json.loads(failed.stdout)["rows"] if not r["passed"]]
    assert row["metric"] == "task_completion" and row["candidate_mean"] == 0.5
    assert "mean 0.5000 below threshold 0.75" in row["reason"]
    assert "uncalibrated" not in row["reason"]  # it failed on its scores, not its setup
    passed = cli(data_dir, *gate[:1], str(lenient), *gate[1:])
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_online_scorer_scores_sampled_traces_by_tier(tmp_path: Path, broker: LocalBroker) -> None:
    data_dir = tmp_path / "data"
    stack, _, http_port = start_stack(
        data_dir, "--kafka", broker.bootstrap, "--capture-tools", "*", "--capture-messages"
    )
    events = tmp_path / "events.jsonl"
    try:
        send_run(http_port, traces=2)
        trace_ids = wait_until(lambda: stored_run_traces(stack, 2))
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for trace_id, tier in zip(trace_ids, ("low", "high"), strict=True):
            sampled = SampledTrace(
                trace_id=trace_id, tenant="default", service="support-agent", agent="support",
                risk_tier=tier, reasons=["base_rate"], conversation_id="", sampled_at_ns=1,
            )  # fmt: skip
            producer.send(SAMPLED_TOPIC, sampled.to_json(), key=trace_id.encode())
        producer.flush()
        producer.close()
        with OpenAIStandIn() as judge:
            scorer = PathgradeProcess(
                ["scorer", "--kafka", broker.bootstrap, "--data-dir", str(data_dir),
                 "--judge-url", judge.url, "--judge-model", "gpt-4o-mini",
                 "--events-out", str(events)],
                ready_text="scorer:",
            )  # fmt: skip
            try:
                wait_until(lambda: scored_metrics(stack, trace_ids[1]) >= HIGH_TIER)
                wait_until(lambda: "claimed_actions" in scored_metrics(stack, trace_ids[0]))
            finally:
                assert scorer.terminate() == 0, scorer.output
        # The stack's realtime sampler may also have sampled these traces (its own tier):
        # the low-tier trace is judged only if it did, the high-tier one always is. Its three
        # prompts alone take the script's first three turns: a pass, a fail, and a malformed
        # answer asked again.
        prompts = len(judge.scripted.final)
        assert prompts >= 3 and len(judge.requests) > prompts
        assert stack.sql(
            "SELECT count(), sum(Attempts) FROM judge_calls FINAL WHERE Model = 'gpt-4o-mini'"
        ).rows == [[prompts, len(judge.requests)]]
        ids = ",".join(f"'{t}'" for t in trace_ids)
        judged = stack.sql(
            "SELECT countIf(Label = 'fail'), countIf(Label = 'fail' AND Value = 0), "
            "countIf(Label = 'pass') FROM scores FINAL "
            f"WHERE TraceId IN ({ids}) AND JudgeModel = 'gpt-4o-mini'"
        ).rows[0]
        failing = failing_verdicts(judge)
        assert judged == [failing, failing, prompts - failing] and failing >= 1
        summary = re.search(
            r"scored (\d+) of (\d+) sampled traces \((\d+) scores, 0 skipped, 0 judge failures\)",
            scorer.output,
        )
        assert summary, scorer.output
        exported = [json.loads(line) for line in events.read_text().splitlines()]
        assert len(exported) == int(summary[3])
        assert {e["name"] for e in exported} == {"gen_ai.evaluation.result"}
        assert {e["attributes"]["gen_ai.evaluation.name"] for e in exported} >= HIGH_TIER
        labels = [e["attributes"].get("gen_ai.evaluation.score.label") for e in exported]
        assert "fail" in labels and "pass" in labels  # the scorer is seen writing both
    finally:
        assert stack.terminate() == 0, stack.output
