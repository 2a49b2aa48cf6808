"""`pathgrade score --run` against a real `pathgrade up` stack: spans sent with the OTel SDK
and the official OTLP/HTTP exporter, judged by the local OpenAI stand-in."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
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


def send_run(http_port: int, traces: int) -> None:
    """`traces` agent turns of run RUN_ID; the last one claims a refund it never made."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test_scoring")
    for index in range(traces):
        claim = "I have refunded your order." if index == traces - 1 else f"Order {index} ok."
        with tracer.start_as_current_span("invoke_agent support") as root:
            root.set_attributes({
                genai.OPERATION_NAME: "invoke_agent", genai.AGENT_NAME: "support",
                "pathgrade.run.id": RUN_ID, "pathgrade.dataset.item_id": f"item-{index}",
                "intent": "status",
                genai.INPUT_MESSAGES: json.dumps([{"role": "user", "content": f"order {index}?"}]),
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


def stored_run_traces(stack: PathgradeProcess, expected: int) -> list[str] | None:
    """The trace ids of RUN_ID once all `expected` traces are stored."""
    query = f"SELECT DISTINCT TraceId FROM spans FINAL WHERE EvalRunId = '{RUN_ID}' ORDER BY 1"
    ids = [row[0] for row in stack.sql(query).rows]
    return ids if len(ids) == expected else None


def score(data_dir: Path, suite: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "score", "--run", RUN_ID, "--suite", str(suite),
         "--data-dir", str(data_dir), "--judge-url", url, *extra],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_score_run_writes_scores_and_a_rerun_hits_the_cache(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    stack, _, http_port = start_stack(data_dir, "--capture-tools", "*", "--capture-messages")
    try:
        send_run(http_port, traces=3)
        wait_until(lambda: stored_run_traces(stack, 3))
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
            assert len(judge.requests) == 6

            again = score(data_dir, suite, judge.url)
            assert again.returncode == 0, again.stderr
            assert "judge: 0 calls" in again.stdout and len(judge.requests) == 6

            capped = score(
                data_dir, suite, judge.url, "--judge-model", "gpt-4o", "--budget-calls", "1"
            )
            assert capped.returncode == 0, capped.stderr
            assert (
                "of 3 traces" in capped.stdout and "stopped: judge budget reached" in capped.stdout
            )
        rows = stack.sql(
            "SELECT Metric, count(), sum(Value), any(JudgeModel), any(Slices['intent']) "
            f"FROM scores FINAL WHERE RunId = '{RUN_ID}' AND JudgeModel != 'gpt-4o' "
            "GROUP BY Metric ORDER BY Metric"
        ).rows
        assert rows == [
            ["claimed_actions", 3, 2.0, "", "status"],  # the refund claim fails PG116
            ["faithfulness", 3, 3.0, "gpt-4o-mini", "status"],
            ["task_completion", 3, 3.0, "gpt-4o-mini", "status"],
        ]
        assert (
            stack.scalar("SELECT count() FROM judge_calls FINAL WHERE Model = 'gpt-4o-mini'") == 6
        )
    finally:
        assert stack.terminate() == 0, stack.output


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
        # the low-tier trace is judged only if it did, the high-tier one always is.
        assert len(judge.requests) >= 3  # the high-tier trace's three judge metrics
        summary = re.search(
            r"scored (\d+) of (\d+) sampled traces \((\d+) scores, 0 skipped, 0 judge failures\)",
            scorer.output,
        )
        assert summary, scorer.output
        exported = [json.loads(line) for line in events.read_text().splitlines()]
        assert len(exported) == int(summary[3])
        assert {e["name"] for e in exported} == {"gen_ai.evaluation.result"}
        assert {e["attributes"]["gen_ai.evaluation.name"] for e in exported} >= HIGH_TIER
    finally:
        assert stack.terminate() == 0, stack.output
