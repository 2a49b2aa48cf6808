"""Judge-based context precision and recall of an offline attempt whose item names no
reference context: the rubrics ask for one verdict per chunk / reference statement, the
answer is checked strictly (count, JSON, 0/1) and the verdicts become the score as RAGAS
computes it; without a judge the metrics say so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pathgrade.batch_plane.agents.adapters import AgentTurn, RetrievedContext
from pathgrade.batch_plane.evaluation.datasets import DatasetItem
from pathgrade.batch_plane.evaluation.judged_retrieval import NO_JUDGE, judged_retrieval_scores
from pathgrade.batch_plane.evaluation.runs import Attempt, score_attempt
from pathgrade.batch_plane.scoring.judge import Judge
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.layers import layer_of
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.scoring.scores import Score

from tests.support.openai_standin import OpenAIStandIn, Reply
from tests.support.traces import TraceBuilder

QUESTION = "Where is the Eiffel Tower located?"
EIFFEL = "The Eiffel Tower is located in Paris."
BRANDENBURG = "The Brandenburg Gate is located in Berlin."
CAPITAL = "Paris is the capital of France."
BASE: dict[str, Any] = {"tenant": "t", "trace_id": "a" * 32, "dataset_item_id": "eiffel"}


@pytest.fixture
def standin() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn() as server:
        yield server


def judge_of(server: OpenAIStandIn, attempts: int = 2) -> Judge:
    endpoint = JudgeEndpoint(server.url, "m-retrieval", max_attempts=attempts)
    return Judge(endpoint, store=None, sleep=lambda _: None)


def verdicts(*flags: int) -> Reply:
    """A judge answer with these verdicts, in order."""
    entries = [{"reason": f"chunk {n}", "verdict": flag} for n, flag in enumerate(flags)]
    return Reply(content={"verdicts": entries, "explanation": "scripted"})


def item(**fields: Any) -> DatasetItem:
    return DatasetItem(item_id="eiffel", input=QUESTION, **fields)


def turn(*chunks: str, response: str = EIFFEL) -> AgentTurn:
    retrieved = [RetrievedContext(text=chunk) for chunk in chunks]
    return AgentTurn(response=response, retrieved_contexts=retrieved)


def by_metric(scores: list[Score]) -> dict[str, Score]:
    return {score.metric: score for score in scores}


def prompt(server: OpenAIStandIn, index: int) -> str:
    return server.requests[index]["messages"][0]["content"]


def test_the_rubrics_ask_for_one_verdict_per_chunk_and_statement_on_the_retrieval_layer() -> None:
    precision, recall = load_rubric("context_precision@1"), load_rubric("context_recall@1")
    assert (precision.layer, recall.layer) == ("retrieval", "retrieval")
    assert (precision.verdicts.per, recall.verdicts.per) == ("contexts", "statements")  # type: ignore[union-attr]
    assert layer_of("context_precision") == layer_of("context_recall") == "retrieval"


def test_ragas_published_precision_and_recall_examples_through_the_judge(
    standin: OpenAIStandIn,
) -> None:
    """RAGAS context_precision.md: the judge finds Eiffel useful and Brandenburg not: 1.0
    with the useful chunk first, 0.5 second (RAGAS prints 0.9999999999, 0.49999999995);
    context_recall.md: the reference's one statement is attributed: 1.0."""
    judge = judge_of(standin)
    standin.enqueue(verdicts(1, 0), verdicts(1))
    first = by_metric(
        judged_retrieval_scores(
            item(reference_answer=EIFFEL), turn(EIFFEL, BRANDENBURG), judge, BASE
        )
    )
    assert first["context_precision"].value == 1.0
    assert first["context_recall"].value == 1.0
    standin.enqueue(verdicts(0, 1), verdicts(1))
    second = by_metric(
        judged_retrieval_scores(
            item(reference_answer=EIFFEL), turn(BRANDENBURG, EIFFEL), judge, BASE
        )
    )
    assert second["context_precision"].value == 0.5
    assert second["context_precision"].label == "fail"
    assert "verdicts 01" in second["context_precision"].explanation
    chunks = json.dumps([BRANDENBURG, EIFFEL])
    assert chunks in prompt(standin, 2) and EIFFEL in prompt(standin, 2)
    assert json.dumps([EIFFEL]) in prompt(standin, 3)  # the reference's one statement


def test_scores_are_traceable_to_rubric_judge_and_item(standin: OpenAIStandIn) -> None:
    standin.enqueue(verdicts(1, 0, 1), verdicts(1, 0))
    reference = "The Eiffel Tower is in Paris. It was finished in 1889."
    scores = by_metric(
        judged_retrieval_scores(
            item(reference_answer=reference),
            turn(EIFFEL, BRANDENBURG, CAPITAL),
            judge_of(standin),
            BASE,
        )
    )
    precision, recall = scores["context_precision"], scores["context_recall"]
    assert precision.value == pytest.approx((1 + 2 / 3) / 2)  # RAGAS average precision
    assert recall.value == 0.5
    assert (precision.scorer, precision.rubric_version, precision.judge_model) == (
        "judge:context_precision", "context_precision@1", "m-retrieval"
    )  # fmt: skip
    assert (recall.rubric_version, recall.dataset_item_id) == ("context_recall@1", "eiffel")
    assert "2 statements of the reference answer" in recall.explanation
    assert json.dumps(["The Eiffel Tower is in Paris.", "It was finished in 1889."]) in prompt(
        standin, 1
    )


def test_without_a_reference_answer_precision_judges_by_the_agents_answer(
    standin: OpenAIStandIn,
) -> None:
    """RAGAS LLMContextPrecisionWithoutReference: the response stands in for the
    reference; recall needs the reference answer's statements, so it is undecided."""
    standin.enqueue(verdicts(1))
    answer = "It stands on the Champ de Mars in Paris."
    scores = by_metric(
        judged_retrieval_scores(item(), turn(EIFFEL, response=answer), judge_of(standin), BASE)
    )
    assert scores["context_precision"].value == 1.0
    assert "against the agent's answer" in scores["context_precision"].explanation
    assert answer in prompt(standin, 0)
    assert (scores["context_recall"].value, scores["context_recall"].label) == (
        None, "cannot_decide"
    )  # fmt: skip
    assert scores["context_recall"].explanation == "the item has no reference answer"
    assert len(standin.requests) == 1


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (verdicts(1), "verdicts: 1 given for 2 contexts (one each)"),
        (Reply(content="[1, 0"), "answer is not JSON"),
        (verdicts(1, 2), "$.verdicts[1].verdict: 2 is greater than 1"),
        (
            Reply(content={"score": 1, "explanation": "no verdicts"}),
            "$: missing required property 'verdicts'",
        ),
        (
            Reply(content={"verdicts": [{"reason": "", "verdict": 1.0}] * 2, "explanation": ""}),
            "verdicts[0]: expected true/false or 1/0, got 1.0",
        ),
    ],
)
def test_a_bad_answer_is_a_failed_judgement_never_a_score(
    standin: OpenAIStandIn, bad: Reply, reason: str
) -> None:
    standin.enqueue(bad, bad)
    (precision,) = [
        s
        for s in judged_retrieval_scores(item(), turn(EIFFEL, BRANDENBURG), judge_of(standin), BASE)
        if s.metric == "context_precision"
    ]
    assert (precision.value, precision.label) == (None, "judge_error")
    assert "gave no valid context_precision@1 verdict after 2 attempts" in precision.explanation
    assert reason in precision.explanation


def test_a_bad_answer_is_retried_and_a_good_one_then_scores(standin: OpenAIStandIn) -> None:
    standin.enqueue(verdicts(1, 0, 0), verdicts(0, 1))
    scores = judged_retrieval_scores(item(), turn(EIFFEL, BRANDENBURG), judge_of(standin), BASE)
    assert by_metric(scores)["context_precision"].value == 0.5
    assert len(standin.requests) == 2


def test_without_a_judge_or_anything_to_judge_the_metrics_say_why() -> None:
    scores = by_metric(
        judged_retrieval_scores(item(reference_answer=EIFFEL), turn(EIFFEL), None, BASE)
    )
    for metric in ("context_precision", "context_recall"):
        assert (scores[metric].value, scores[metric].label) == (None, "cannot_decide")
        assert scores[metric].explanation == NO_JUDGE
        assert scores[metric].rubric_version == f"{metric}@1"
    nothing = by_metric(judged_retrieval_scores(item(reference_answer=EIFFEL), turn(), None, BASE))
    for metric in ("context_precision", "context_recall"):  # an empty list scores 0.0
        assert (nothing[metric].value, nothing[metric].label) == (0.0, "fail")
        assert nothing[metric].explanation == "nothing was retrieved"
    unreferenced = by_metric(judged_retrieval_scores(item(), turn(), None, BASE))
    assert unreferenced["context_precision"].value == 0.0
    assert unreferenced["context_recall"].value is None
    assert unreferenced["context_recall"].explanation == "the item has no reference answer"
    ids_only = AgentTurn(response="x", retrieved_contexts=[RetrievedContext(id="kb-1")])
    unreadable = by_metric(judged_retrieval_scores(item(), ids_only, None, BASE))
    assert "no text for the judge" in unreadable["context_precision"].explanation


def test_reference_contexts_or_no_retrieval_report_leave_the_judge_out(
    standin: OpenAIStandIn,
) -> None:
    judge = judge_of(standin)
    with_reference = item(reference_contexts=[EIFFEL])
    assert judged_retrieval_scores(with_reference, turn(EIFFEL), judge, BASE) == []
    assert judged_retrieval_scores(item(), AgentTurn(response="x"), judge, BASE) == []
    assert standin.requests == []


def test_a_dataset_attempt_gets_the_judged_scores_beside_the_deterministic_ones(
    standin: OpenAIStandIn,
) -> None:
    standin.enqueue(verdicts(0, 1), verdicts(1))
    trace = TraceBuilder("3" * 32)
    trace.tool("search_kb", {"q": "eiffel"})
    attempt = Attempt(item(reference_answer=EIFFEL), 0, turn(BRANDENBURG, EIFFEL))
    scores = by_metric(score_attempt(attempt, trace.build(), "run-j", judge=judge_of(standin)))
    assert scores["context_precision"].value == 0.5
    assert scores["context_recall"].value == 1.0
    assert (scores["context_precision"].run_id, scores["context_precision"].trace_id) == (
        "run-j", "3" * 32
    )  # fmt: skip
    assert scores["reference_match"].scorer == "pathgrade.deterministic"
    unjudged = by_metric(score_attempt(attempt, trace.build(), "run-j"))
    assert unjudged["context_precision"].explanation == NO_JUDGE
