"""Judge-based context precision and recall of one offline attempt, for an item that names
no reference context (`layer_metrics.retrieval_metrics` scores the others without a model).

When the agent said what it retrieved (`AgentTurn.retrieved_contexts`, with text):
- `context_precision` (rubric `context_precision`): one verdict per chunk, was it useful
  to arrive at the answer: the item's reference answer when it has one (RAGAS
  `LLMContextPrecisionWithReference`), else the agent's answer
  (`LLMContextPrecisionWithoutReference`);
- `context_recall` (rubric `context_recall`, needs the item's reference answer): one
  verdict per statement of the reference answer (RAGAS `LLMContextRecall`).

The verdicts become the score through `scoring.retrieval`. Without a judge, with nothing
to judge, or when the judge fails (a bad answer after retries, the budget spent), the
metric is stored without a value and says why (`cannot_decide`, `judge_error`).
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
    missing = _nothing_to_judge(turn, chunks)
    return [
        _judged(
            "context_precision", precision, judge, base,
            missing or ("" if answer else "neither a reference answer nor an answer to judge by"),
            f"{len(chunks)} chunks against {graded}",
        ),
        _judged(
            "context_recall", recall, judge, base,
            missing or ("" if recall["statements"] else "the item has no reference answer"),
            f"{len(recall['statements'])} statements of the reference answer",
        ),
    ]  # fmt: skip


def _nothing_to_judge(turn: AgentTurn, chunks: list[str]) -> str:
    """Why the retrieved chunks cannot be judged ("" when they can)."""
    if not turn.retrieved_contexts:
        return "nothing was retrieved to judge"
    if not chunks:
        return "the retrieved chunks carry no text for the judge to read"
    return ""


def _judged(
    metric: str,
    inputs: dict[str, Any],
    judge: Judge | None,
    base: dict[str, Any],
    undecidable: str,
    graded: str,
) -> Score:
    """One metric's score: the judge's verdicts aggregated, or no value and why."""
    rubric = load_rubric(metric)
    fields = {"scorer": f"judge:{rubric.id}", "scorer_version": rubric.ref, **base}
    fields["rubric_version"] = rubric.ref
    if undecidable or judge is None:
        why = undecidable or NO_JUDGE
        return Score(metric, value=None, label=CANNOT_DECIDE, explanation=why, **fields)
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
