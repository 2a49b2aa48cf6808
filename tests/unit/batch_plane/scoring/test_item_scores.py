"""Reference and item metrics of offline runs: trajectory accuracy against the dataset
item's expected tool calls, and EDGE response consistency over an item's repeats."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.scoring.hallucination import judge_inputs
from pathgrade.batch_plane.scoring.judge import Judge, JudgeError
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.scores import evaluation_event
from pathgrade.batch_plane.scoring.trace_scorers import TraceScorer, UnknownMetric
from pathgrade.content.otlp import decode_spans_message
from pathgrade.schemas.model import Trace

from pathgrade.demo.sender import send_demo_traces
from tests.support.openai_standin import OpenAIStandIn, Reply


def demo_traces(count: int, seed: int) -> list[Trace]:
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=count, seed=seed)
    data = encode_spans(exporter.get_finished_spans()).SerializeToString()
    by_trace: dict[str, list] = {}
    for span in decode_spans_message(data, "acme", 1):
        by_trace.setdefault(span.trace_id, []).append(span)
    return [Trace("acme", trace_id, spans) for trace_id, spans in by_trace.items()]


def as_repeats(traces: list[Trace], item: str) -> list[Trace]:
    """Mark `traces` as repeats 0..n-1 of dataset item `item` in run `run-1`."""
    for index, trace in enumerate(traces):
        assert trace.root is not None
        trace.root.eval.dataset_item_id, trace.root.eval.run_id = item, "run-1"
        trace.root.eval.replay_index = index
    return traces


@pytest.fixture
def standin() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn() as server:
        yield server


def judge_for(server: OpenAIStandIn) -> Judge:
    return Judge(JudgeEndpoint(server.url, "gpt-4o-mini"), store=None)


def test_trajectory_accuracy_sends_the_items_reference_and_skips_items_without_one(
    standin: OpenAIStandIn,
) -> None:
    with_ref, without_ref = as_repeats(demo_traces(1, 3), "item-a") + as_repeats(
        demo_traces(1, 4), "item-b"
    )
    reference = [{"name": "lookup_order", "args": {"order_id": "ORD-123456"}}]
    standin.enqueue(Reply(content={"score": 2, "explanation": "partly overlapping"}))
    scorer = TraceScorer(("trajectory_accuracy",), judge_for(standin), (), {"item-a": reference})
    scores = scorer.score(with_ref)
    assert [(s.metric, s.dataset_item_id, s.label) for s in scores] == [
        ("trajectory_accuracy", "item-a", "fail")
    ]
    assert scores[0].value == pytest.approx(1 / 3)  # 2 on the 1-4 scale
    assert "ORD-123456" in standin.requests[0]["messages"][0]["content"]
    assert scorer.score(without_ref) == []  # missing, so the gate fails it
    assert len(standin.requests) == 1


def test_lexical_consistency_over_repeats_needs_no_model() -> None:
    same = as_repeats(demo_traces(1, 5) * 3, "item-same")  # the same answer three times
    mixed = as_repeats(demo_traces(3, 6), "item-mixed")
    alone = as_repeats(demo_traces(1, 7), "item-alone")
    scorer = TraceScorer(())
    lexical = scorer.item_scores(same + mixed + alone, ["response_consistency_lexical"])
    scores = {s.dataset_item_id: s for s in lexical}
    assert set(scores) == {"item-same", "item-mixed"}  # one answer is no consistency
    assert scores["item-same"].value == 1.0
    assert 0.0 <= scores["item-mixed"].value < 1.0
    assert scores["item-same"].trace_id == same[0].trace_id and scores["item-same"].repeat == 0


def test_judged_consistency_sends_every_answer_once_per_item(standin: OpenAIStandIn) -> None:
    repeats = as_repeats(demo_traces(3, 8), "item-x")
    scorer = TraceScorer((), judge_for(standin))
    [score] = scorer.item_scores(repeats, ["response_consistency"])
    assert score.metric == "response_consistency" and score.judge_model == "gpt-4o-mini"
    prompt = standin.requests[0]["messages"][0]["content"]
    assert len(standin.requests) == 1
    assert score.rubric_version.startswith("response_consistency@")
    for trace in repeats:
        assert json.dumps(judge_inputs(trace)["answer"])[1:-1] in prompt


def test_item_metrics_refuse_unknown_names_and_a_missing_judge() -> None:
    with pytest.raises(UnknownMetric, match="not an item metric"):
        TraceScorer(()).item_scores([], ["faithfulness"])
    with pytest.raises(UnknownMetric, match="needs a judge"):
        TraceScorer(()).item_scores([], ["response_consistency"])


def test_recorded_judge_failure_keeps_the_other_scores(standin: OpenAIStandIn) -> None:
    [trace] = demo_traces(1, 9)
    metrics = ("claimed_actions", "faithfulness", "task_completion")
    standin.enqueue(Reply(status=400))  # not retryable: the first judge call fails
    raising = TraceScorer(metrics, judge_for(standin))
    with pytest.raises(JudgeError):
        raising.score(trace)
    standin.enqueue(Reply(status=400))
    recording = TraceScorer(metrics, judge_for(standin), record_judge_failures=True)
    scores = {s.metric: s for s in recording.score(trace)}
    assert set(scores) == set(metrics)
    failed = scores["faithfulness"]
    assert (failed.value, failed.label) == (None, "judge_error")
    assert failed.explanation.startswith("judge failed:") and failed.judge_model == "gpt-4o-mini"
    assert evaluation_event(failed)["attributes"]["error.type"] == "judge_error"
    assert scores["task_completion"].value is not None  # the next call succeeded
    assert scores["claimed_actions"].label in ("pass", "fail")
