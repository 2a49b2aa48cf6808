"""Judge-based context precision and recall of one offline attempt, for an item that names
no reference context (`layer_metrics.retrieval_metrics` scores the others without a model).

When the agent said what it retrieved (`AgentTurn.retrieved_contexts`, with text):
- `context_precision` (rubric `context_precision`): one verdict per chunk, was it useful
  to arrive at the answer: the item's reference answer when it has one (RAGAS
  `LLMContextPrecisionWithReference`), else the agent's answer
  (`LLMContextPrecisionWithoutReference`);
- `context_recall` (rubric `context_recall`, needs the item's reference answer): one
  verdict per statement of the reference answer (RAGAS `LLMContextRecall`).

The verdicts become the score through `scoring.retrieval`. When the agent retrieved
nothing, both are 0.0 without asking (as the libraries score an empty list). Without a
judge, without chunk text or a reference answer to judge by, or when the judge fails (a
bad answer after retries, the budget spent), the metric is stored without a value and
says why (`cannot_decide`, `judge_error`).
"""

from __future__ import annotations

from typing import Any

from pathgrade.batch_plane.agents.adapters import AgentTurn
from pathgrade.batch_plane.evaluation.datasets import DatasetItem
from pathgrade.batch_plane.evaluation.layer_metrics import CANNOT_DECIDE
from pathgrade.batch_plane.scoring.judge import BudgetExhausted, Judge, JudgeError
from pathgrade.batch_plane.scoring.retrieval import statements
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.scoring.scores import Score
from pathgrade.schemas.evaluation_records import JUDGE_ERROR_LABEL

NOTHING_RETRIEVED = "nothing was retrieved"
NO_JUDGE = "judged without a reference context: needs a judge (--judge-url), none configured"


def judged_retrieval_scores(
    item: DatasetItem, turn: AgentTurn | None, judge: Judge | None, base: dict[str, Any]
) -> list[Score]:
    """The judge-based retrieval scores of one attempt (see the module doc); `base` holds
    the Score fields linking it to its trace, item and run. None when the item names
    reference contexts or the agent did not say what it retrieved."""
    if item.reference_context_ids or item.reference_contexts:
        return []
    if turn is None or turn.retrieved_contexts is None:
        return []
    chunks = [chunk.text for chunk in turn.retrieved_contexts if chunk.text]
    question = item.user_message
    reference = item.reference_answer or ""
    answer = reference or turn.response
    graded = "the reference answer" if reference else "the agent's answer"
    precision = {"question": question, "answer": answer, "contexts": chunks}
    recall = {"question": question, "contexts": chunks, "statements": statements(reference)}
    no_answer = "" if answer else "neither a reference answer nor an answer to judge by"
    no_reference = "" if recall["statements"] else "the item has no reference answer"
    if not turn.retrieved_contexts:  # nothing to find relevant or to attribute to: 0.0
        return [
            _unjudged("context_precision", base, NOTHING_RETRIEVED, 0.0),
            _unjudged("context_recall", base, no_reference or NOTHING_RETRIEVED,
                      None if no_reference else 0.0),
        ]  # fmt: skip
    unreadable = "" if chunks else "the retrieved chunks carry no text for the judge to read"
    return [
        _judged(
            "context_precision", precision, judge, base, unreadable or no_answer,
            f"{len(chunks)} chunks against {graded}",
        ),
        _judged(
            "context_recall", recall, judge, base, unreadable or no_reference,
            f"{len(recall['statements'])} statements of the reference answer",
        ),
    ]  # fmt: skip


def _unjudged(metric: str, base: dict[str, Any], why: str, value: float | None = None) -> Score:
    """A score the judge was not asked for: `value` (0.0 when nothing was retrieved), or
    no value (`cannot_decide`), and why."""
    rubric = load_rubric(metric)
    label = CANNOT_DECIDE if value is None else "fail"
    return Score(
        metric, f"judge:{rubric.id}", rubric.ref, value=value, label=label, explanation=why,
        rubric_version=rubric.ref, **base,
    )  # fmt: skip


def _judged(
    metric: str,
    inputs: dict[str, Any],
    judge: Judge | None,
    base: dict[str, Any],
    undecidable: str,
    graded: str,
) -> Score:
    """One metric's score: the judge's verdicts aggregated, or no value and why."""
    if undecidable or judge is None:
        return _unjudged(metric, base, undecidable or NO_JUDGE)
    rubric = load_rubric(metric)
    fields = {"scorer": f"judge:{rubric.id}", "scorer_version": rubric.ref, **base}
    fields["rubric_version"] = rubric.ref
    fields["judge_model"] = judge.endpoint.model
    try:
        result = judge.evaluate(rubric, inputs)
    except (JudgeError, BudgetExhausted) as exc:
        why = f"judge failed: {exc}"
        return Score(metric, value=None, label=JUDGE_ERROR_LABEL, explanation=why, **fields)
    verdict = result.verdict
    flags = "".join(str(entry["verdict"]) for entry in verdict.model_extra["verdicts"])
    return Score(
        metric,
        value=verdict.score,
        label="pass" if verdict.score >= rubric.scale.pass_at else "fail",
        explanation=f"{graded}, verdicts {flags}: {verdict.explanation}",
        **fields,
    )
