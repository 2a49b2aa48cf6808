"""Datasets, triage, replay and the release gate against a real `pathgrade up` (Tansu,
chDB, collector), driven through the `pathgrade` command line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from pathgrade.schemas.topics import SPANS_TOPIC

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import free_port
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.support.topics import read_topic_to_end

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seeded_defects"


class Stack:
    def __init__(self, process: PathgradeProcess, data_dir: Path, http_port: int) -> None:
        self.process = process
        self.data_dir = data_dir
        self.http_port = http_port

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`pathgrade ARGS --data-dir <the stack's>`: commands reach the store through it."""
        return subprocess.run(
            [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(self.data_dir)],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def messages_for(self, trace_ids: list[str]) -> int:
        """pathgrade.spans messages (read from the start to its end now) keyed by one of
        `trace_ids`."""
        state = json.loads((self.data_dir / "stack.json").read_text())
        keys = {t.encode() for t in trace_ids}
        return sum(1 for m in read_topic_to_end(state["kafka"], SPANS_TOPIC) if m.key in keys)

    def demo_traces(self, traces: int, seed: int) -> list[str]:
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{self.http_port}/v1/traces")
        summary = send_demo_traces(exporter, traces=traces, seed=seed)
        ids = ",".join(f"'{t}'" for t in summary.trace_ids)
        wait_until(
            lambda: (
                self.process.scalar(f"SELECT count() FROM spans FINAL WHERE TraceId IN ({ids})")
                == summary.spans
            )
        )
        return summary.trace_ids


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("datasets")
    process, _, http_port = start_stack(data_dir, "--capture-tools", "*", "--capture-messages")
    yield Stack(process, data_dir, http_port)
    assert process.terminate() == 0, process.output


def test_import_publish_export_round_trip_and_immutability(stack: Stack, tmp_path: Path) -> None:
    golden = EXAMPLE / "golden.jsonl"
    done = stack.cli("dataset", "import", "golden/round-trip", str(golden), "--owner", "qa",
                     "--publish")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "golden/round-trip@1 (golden, published, 9 items, owner qa)" in done.stdout
    out = tmp_path / "export.jsonl"
    assert stack.cli("dataset", "export", "golden/round-trip", "--out", str(out)).returncode == 0
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    original = [json.loads(line) for line in golden.read_text().splitlines()]
    assert [e["item_id"] for e in exported] == sorted(o["item_id"] for o in original)
    by_id = {e["item_id"]: e for e in exported}
    for item in original:
        assert {k: by_id[item["item_id"]][k] for k in item} == item
    refused = stack.cli("dataset", "add", "golden/round-trip", str(golden))
    assert refused.returncode == 1
    assert "golden/round-trip@1 is published and immutable" in refused.stderr


def test_triage_keeps_the_trace_the_input_and_the_lesson_and_replay_stores_each_span_once(
    stack: Stack,
) -> None:
    trace_ids = stack.demo_traces(traces=12, seed=21)
    ids = ",".join(f"'{t}'" for t in trace_ids)
    on_tools = (
        "SELECT a.TraceId, a.Code, s.GenAIToolName FROM alerts AS a FINAL JOIN spans AS s FINAL "
        "ON a.SpanId = s.SpanId AND a.TraceId = s.TraceId WHERE a.Kind = 'violation' AND "
        f"a.TraceId IN ({ids}) AND s.GenAIOperation = 'execute_tool' ORDER BY 1, 2 LIMIT 1"
    )
    failing, code, tool = wait_until(lambda: stack.process.sql(on_tools).rows)[0]
    healthy = stack.process.scalar(  # a scenario the demo plays without a failure
        f"SELECT any(TraceId) FROM spans FINAL WHERE TraceId IN ({ids}) AND ParentSpanId = '' "
        "AND SpanAttributes['pathgrade.demo.scenario'] IN ('order_status', 'refund', "
        "'requested_ticket', 'bill_explanation', 'kb_question')"
    )
    triaged = stack.cli("triage", failing, "--to", "regression/demo")
    assert triaged.returncode == 0, triaged.stderr
    refused = stack.cli("triage", healthy, "--to", "regression/demo")
    assert refused.returncode == 1 and "would check nothing" in refused.stderr
    exported = stack.cli("dataset", "export", "regression/demo")
    items = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [i["source_trace_id"] for i in items] == [failing]
    (item,) = items
    assert item["input"]["user"] and item["expected_tool_calls"] == []  # no failing path
    quiet, *forbidden = item["checks"]  # the lesson: the codes stay quiet, the tools uncalled
    assert quiet["check"] == "detectors_quiet" and code in quiet["codes"]
    assert {"check": "tool_not_called", "tool": tool} in forbidden
    made = stack.cli("dataset", "from-traces", "regression/demo-bulk", "--where",
                     f"TraceId IN ({ids})")  # fmt: skip
    assert made.returncode == 0 and "(regression, draft," in made.stdout, made.stderr
    assert f"skipped: trace {healthy}" in made.stderr

    ids = ",".join(f"'{t}'" for t in trace_ids)
    spans_before = stack.process.scalar(f"SELECT count() FROM spans FINAL WHERE TraceId IN ({ids})")
    messages_before = stack.messages_for(trace_ids)
    replayed = stack.cli("replay", "--where", f"TraceId IN ({ids})", "--rate", "50")
    assert replayed.returncode == 0, replayed.stderr
    assert f"replayed {len(trace_ids)} traces ({spans_before} spans)" in replayed.stdout
    assert "replay: 12/12" in replayed.stderr  # progress
    assert stack.messages_for(trace_ids) - messages_before == len(trace_ids)
    wait_until(
        lambda: (
            stack.process.scalar(f"SELECT count() FROM spans WHERE TraceId IN ({ids})")
            >= 2 * spans_before
        )
    )  # the replayed copies reached the store ...
    assert stack.process.sql(
        f"SELECT count(), uniqExact(TraceId, SpanId) FROM spans FINAL WHERE TraceId IN ({ids})"
    ).rows[0] == [spans_before, spans_before]  # ... and FINAL still holds one row per span


def test_stored_conversations_replay_against_an_agent_as_a_new_run(stack: Stack) -> None:
    trace_ids = stack.demo_traces(traces=6, seed=33)
    ids = ",".join(f"'{t}'" for t in trace_ids)
    made = stack.cli("dataset", "from-traces", "benchmark/convs", "--where",
                     f"TraceId IN ({ids})", "--kind", "benchmark")  # fmt: skip
    assert made.returncode == 0 and "added 6 traces as items" in made.stdout, made.stderr
    replayed = stack.cli("replay", "conversations", "--dataset", "benchmark/convs", "--agent",
                         f"{EXAMPLE / 'agent.py'}:healthy", "--run-id", "run-conv")  # fmt: skip
    assert "run run-conv finished: 6 attempts, 6 traces" in replayed.stdout, replayed.stderr
    assert (
        stack.process.scalar(
            "SELECT uniqExact(TraceId) FROM spans FINAL WHERE EvalRunId = 'run-conv'"
        )
        == 6
    )
    assert stack.process.scalar("SELECT count() FROM scores FINAL WHERE RunId = 'run-conv'") > 0


def test_a_replay_whose_spans_the_collector_never_accepted_says_so(stack: Stack) -> None:
    trace_ids = stack.demo_traces(traces=2, seed=34)
    ids = ",".join(f"'{t}'" for t in trace_ids)
    made = stack.cli("dataset", "from-traces", "benchmark/unsent", "--where",
                     f"TraceId IN ({ids})", "--kind", "benchmark")  # fmt: skip
    assert made.returncode == 0, made.stderr
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    replayed = stack.cli("replay", "conversations", "--dataset", "benchmark/unsent", "--agent",
                         f"{EXAMPLE / 'agent.py'}:healthy", "--run-id", "run-unsent",
                         "--otlp", nobody, "--trace-timeout", "1")  # fmt: skip
    assert replayed.returncode == 1
    assert "run run-unsent failed: 2 attempts, 0 traces" in replayed.stdout, replayed.stderr
    assert "no trace stored" in replayed.stderr
    assert f"sending spans to {nobody} failed: " in replayed.stderr
    assert "span(s) in 1 batch(es) not accepted" in replayed.stderr


JUDGED_SUITE = """
suite: support-agent-judged
risk_tier: medium
datasets:
  - name: golden/support-judged
runs_per_item: 2
judge:
  model: gpt-4o-mini
  rubric_version: faithfulness@1
  calibration_set: human-labels/support-v1
metrics:
  - id: tool_correctness
    threshold: 0.9
  - id: faithfulness
    threshold: 0.9
  - id: trajectory_accuracy
    threshold: 0.75
  - id: response_consistency
    threshold: 0.75
  - id: response_consistency_lexical
    threshold: 0.5
"""


def test_eval_with_a_judge_scores_the_judge_metrics_of_the_run(
    stack: Stack, tmp_path: Path
) -> None:
    from tests.support.openai_standin import OpenAIStandIn

    suite = tmp_path / "suite.yaml"
    suite.write_text(JUDGED_SUITE)
    imported = stack.cli("dataset", "import", "golden/support-judged",
                         str(EXAMPLE / "golden.jsonl"), "--publish")  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    run_id = f"run-judged-{tmp_path.name[-6:]}"
    with OpenAIStandIn() as judge:
        done = stack.cli("eval", str(suite), "--agent", f"{EXAMPLE / 'agent.py'}:healthy",
                         "--run-id", run_id, "--judge-url", judge.url)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert judge.requests, "the judge was never called"
    assert "judge: " in done.stdout and "uncalibrated" in done.stdout
    metrics = stack.process.sql(
        f"SELECT Metric, count() FROM scores FINAL WHERE RunId = '{run_id}' GROUP BY 1 ORDER BY 1"
    ).rows
    counts = dict(metrics)
    items = sum(1 for line in (EXAMPLE / "golden.jsonl").read_text().splitlines() if line.strip())
    assert counts["faithfulness"] == counts["tool_correctness"] == 2 * items  # every attempt
    assert counts["trajectory_accuracy"] == 2 * items  # every golden item has a reference
    assert counts["response_consistency"] == counts["response_consistency_lexical"] == items


RETRIEVING_AGENT = f"""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("seeded_agent", {str(EXAMPLE / "agent.py")!r})
seeded = sys.modules["seeded_agent"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seeded)


def retrieving(state, message, context):
    \"\"\"The healthy build, saying it retrieved a useful and an unrelated chunk.\"\"\"
    turn = seeded.healthy.respond(state, message, context)
    chunks = [{{"text": "Order status: " + message}}, {{"text": "Store hours are 9 to 5."}}]
    return {{**turn, "retrieved_contexts": chunks}}
"""

RETRIEVAL_SUITE = """
suite: support-agent-retrieval
risk_tier: medium
datasets:
  - name: golden/support-retrieval
runs_per_item: 1
metrics:
  - id: tool_correctness
    threshold: 0.9
"""


def useful_first(request: dict) -> dict:
    """A judge: the first chunk useful, the second not; every statement attributed."""
    prompt = request["messages"][0]["content"]
    arrays = [json.loads(line) for line in prompt.splitlines() if line.startswith("[")]
    graded = arrays[-1]
    flags = [1] * len(graded) if len(arrays) == 2 else [int(i == 0) for i in range(len(graded))]
    return {"verdicts": [{"reason": "", "verdict": f} for f in flags], "explanation": "ok"}


def test_eval_judges_retrieval_of_items_without_reference_contexts(
    stack: Stack, tmp_path: Path
) -> None:
    """`pathgrade eval --judge-url`: the agent says what it retrieved and the items name no
    reference context, so context precision and recall are judged (rubric versions and
    judge model stored); without --judge-url they are stored without a value, saying so."""
    from tests.support.openai_standin import OpenAIStandIn

    agent = tmp_path / "retrieving_agent.py"
    agent.write_text(RETRIEVING_AGENT)
    suite = tmp_path / "suite.yaml"
    suite.write_text(RETRIEVAL_SUITE)
    imported = stack.cli("dataset", "import", "golden/support-retrieval",
                         str(EXAMPLE / "golden.jsonl"), "--publish")  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    judged, unjudged = (f"run-{kind}-{tmp_path.name[-6:]}" for kind in ("rj", "ru"))
    with OpenAIStandIn(answer=useful_first) as judge:
        done = stack.cli("eval", str(suite), "--agent", f"{agent}:retrieving", "--run-id", judged,
                         "--judge-url", judge.url, "--judge-model", "m-retrieval")  # fmt: skip
        assert done.returncode == 0, done.stderr
    items = sum(1 for line in (EXAMPLE / "golden.jsonl").read_text().splitlines() if line.strip())
    assert len(judge.requests) == 2 * items  # one per metric and attempt
    rows = stack.process.sql(
        "SELECT Metric, Value, Label, RubricVersion, JudgeModel FROM scores FINAL "
        f"WHERE RunId = '{judged}' AND Metric LIKE 'context_%' ORDER BY Metric"
    ).rows
    assert len(rows) == 2 * items
    precision = {tuple(r) for r in rows if r[0] == "context_precision"}
    assert precision == {("context_precision", 1.0, "pass", "context_precision@1", "m-retrieval")}
    recall = {tuple(r) for r in rows if r[0] == "context_recall"}
    assert recall == {("context_recall", 1.0, "pass", "context_recall@1", "m-retrieval")}
    done = stack.cli("eval", str(suite), "--agent", f"{agent}:retrieving", "--run-id", unjudged)
    assert done.returncode == 0, done.stderr
    rows = stack.process.sql(
        "SELECT DISTINCT Metric, isNull(Value), Label, Explanation FROM scores FINAL "
        f"WHERE RunId = '{unjudged}' AND Metric LIKE 'context_%' ORDER BY Metric"
    ).rows
    assert [tuple(r[:3]) for r in rows] == [
        ("context_precision", 1, "cannot_decide"), ("context_recall", 1, "cannot_decide")
    ]  # fmt: skip
    assert all("needs a judge (--judge-url), none configured" in r[3] for r in rows)
