"""A reviewer's label as a human score: values on the rubric's scale, the links it keeps,
and the errors that name the field (the queue and export run on a real store in
tests/integration/test_terminal_review.py)."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.scoring.calibration import HumanLabel
from pathgrade.batch_plane.scoring.review import (
    HUMAN_SCORER,
    ReviewError,
    dump_labels,
    human_score,
    parse_value,
    review_rubric,
)
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.scoring.scores import score_id
from pathgrade.batch_plane.store.review import queue_query

from tests.unit.batch_plane.scoring.test_item_scores import as_repeats, demo_traces

RUBRIC = load_rubric("task_completion")  # scale 1..4, passing at 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [("pass", (1.0, "pass")), ("fail", (0.0, "fail")), ("4", (1.0, "pass")),
     ("3", (2 / 3, "pass")), ("2.5", (0.5, "fail")), ("1", (0.0, "fail"))],
)  # fmt: skip
def test_a_value_is_pass_fail_or_a_score_on_the_rubric_scale(text, expected) -> None:
    assert parse_value(text, RUBRIC) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "message"),
    [("9", "--value: 9 is outside the task_completion@1 scale 1..4"),
     ("good", "--value: expected pass, fail or a score 1..4, got 'good'")],
)  # fmt: skip
def test_a_bad_value_is_refused_naming_the_flag(text, message) -> None:
    with pytest.raises(ReviewError, match=message):
        parse_value(text, RUBRIC)


def test_only_judge_metrics_of_a_trace_are_labelled() -> None:
    assert review_rubric("faithfulness").ref == "faithfulness@1"
    with pytest.raises(ReviewError, match="--metric: 'claimed_actions' is not a judge metric"):
        review_rubric("claimed_actions")


def test_a_label_links_the_root_span_dataset_item_and_run_and_says_human() -> None:
    (trace,) = as_repeats(demo_traces(1, 3), "item-a")
    score = human_score(trace, "task_completion", "2", note="missed the refund")
    assert trace.root is not None
    assert (score.scorer, score.label, score.explanation) == (
        HUMAN_SCORER, "fail", "missed the refund",
    )  # fmt: skip
    assert score.value == pytest.approx(1 / 3)
    assert (score.span_id, score.dataset_item_id, score.run_id) == (
        trace.root.span_id, "item-a", "run-1",
    )  # fmt: skip
    assert (score.tenant, score.trace_id, score.rubric_version) == (
        "acme", trace.trace_id, "task_completion@1",
    )  # fmt: skip
    relabelled = human_score(trace, "task_completion", "pass")
    assert relabelled.score_id == score.score_id  # the same trace and span: replaces


def test_a_label_may_name_another_span_of_the_trace_but_not_a_foreign_one() -> None:
    (trace,) = demo_traces(1, 5)
    child = next(span for span in trace.spans if span is not trace.root)
    score = human_score(trace, "faithfulness", "pass", span_id=child.span_id)
    assert score.span_id == child.span_id
    assert score.score_id == score_id(
        HUMAN_SCORER, score.scorer_version, trace.trace_id, child.span_id, "", "", 0
    )
    with pytest.raises(ReviewError, match=r"--span: trace .* has no span 'ffffffffffffffff'"):
        human_score(trace, "faithfulness", "pass", span_id="ffffffffffffffff")


def test_the_queue_query_filters_what_it_is_asked_to_and_pages_by_keyset() -> None:
    sql, parameters = queue_query()
    assert parameters == {"limit": 100} and "{tenant:String}" not in sql and "HAVING" not in sql
    sql, parameters = queue_query("faithfulness", 20, "acme", (123, "ab" * 16))
    assert parameters == {
        "limit": 20, "tenant": "acme", "metric": "faithfulness", "after_ns": 123,
        "after_trace": "ab" * 16,
    }  # fmt: skip
    assert sql.count("Tenant = {tenant:String}") == 3  # feedback, alerts and labels
    assert "Metric = {metric:String}" in sql and "HAVING (StartedAtNs, TraceId) >" in sql


def test_exported_labels_read_back_as_the_calibration_format() -> None:
    labels = [
        HumanLabel(item_id="t1", input={"question": "é?", "answer": "", "tool_calls": []},
                   label="fail"),
        HumanLabel(item_id="t2", input={"question": "", "answer": "", "tool_calls": []},
                   label="pass"),
    ]  # fmt: skip
    text = dump_labels(labels)
    assert [HumanLabel.model_validate_json(line) for line in text.splitlines()] == labels
