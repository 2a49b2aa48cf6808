"""The `context_precision` and `context_recall` rubrics' shipped calibration labels: they
load against the rubrics, a judge answering the humans' per-chunk / per-statement verdicts
reproduces every labelled score, and calibrates as the other rubrics do."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pathgrade.batch_plane.scoring.calibration import (
    calibrate,
    calibration_status,
    labels_digest,
    load_labels,
    store_calibration,
)
from pathgrade.batch_plane.scoring.judge import Judge
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.store.client import ClientStore
from ragas.metrics import LLMContextPrecisionWithReference, LLMContextRecall
from ragas.metrics._context_precision import Verification
from ragas.metrics._context_recall import ContextRecallClassification

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.openai_standin import OpenAIStandIn
from tests.support.paths import REPO_ROOT

USEFUL = {
    "The Eiffel Tower is located in Paris.",
    "Refunds are paid back to the original card within five business days.",
    "A refund is started once the returned item reaches the warehouse.",
}
"""The chunks the humans found useful to arrive at the answers of the precision labels."""


def json_lines(prompt: str) -> list[list[str]]:
    """The JSON arrays the rubric rendered into the prompt, in order."""
    return [json.loads(line) for line in prompt.splitlines() if line.startswith("[")]


def humans_verdicts(request: dict[str, Any]) -> dict[str, Any]:
    """The humans' verdicts, read back from the prompt: a chunk is useful when the humans
    said so; a statement is attributed when a retrieved chunk states it."""
    prompt = request["messages"][0]["content"]
    arrays = json_lines(prompt)
    if len(arrays) == 1:
        flags = [int(chunk in USEFUL) for chunk in arrays[0]]
    else:
        contexts, statements = arrays
        flags = [int(statement in contexts) for statement in statements]
    entries = [{"reason": "scripted", "verdict": flag} for flag in flags]
    return {"verdicts": entries, "explanation": "the humans' verdicts"}


@pytest.mark.parametrize("metric", ["context_precision", "context_recall"])
def test_the_shipped_labels_are_reproduced_and_calibrate(metric: str, store: ClientStore) -> None:
    """`pathgrade judge calibrate --rubric <metric>@1 --labels
    examples/calibration/<metric>.jsonl`."""
    rubric = load_rubric(f"{metric}@1")
    labels = load_labels(REPO_ROOT / "examples" / "calibration" / f"{metric}.jsonl", rubric)
    assert {label.passed(rubric) for label in labels} == {True, False}
    with OpenAIStandIn(answer=humans_verdicts) as server:
        judge = Judge(JudgeEndpoint(server.url, f"m-{metric}"), store=store)
        scores = {
            label.item_id: judge.evaluate(rubric, label.input).verdict.score for label in labels
        }
        assert scores == {label.item_id: label.label for label in labels}
        result = calibrate(judge, rubric, labels, repeats=1, labels_sha256=labels_digest(labels))
    assert (result.items, result.agreement, result.kappa) == (len(labels), 1.0, 1.0)
    store_calibration(store, result)
    assert calibration_status(store, f"m-{metric}", rubric.ref)


def test_the_rubrics_score_verdicts_as_the_installed_ragas_does() -> None:
    """RAGAS's LLM metrics' formulas (`_calculate_average_precision`, LLMContextRecall's
    `_compute_score`) on 300 generated verdict lists, against the rubrics' scores of the
    same verdicts (RAGAS's precision carries its 1e-10 in the denominator)."""
    rng = random.Random(4417)
    precision, recall = load_rubric("context_precision@1"), load_rubric("context_recall@1")
    ragas_precision, ragas_recall = LLMContextPrecisionWithReference(), LLMContextRecall()
    for _ in range(300):
        flags = [int(rng.random() < 0.5) for _ in range(rng.randint(1, 8))]
        answer = {"verdicts": [{"reason": "", "verdict": f} for f in flags], "explanation": ""}
        expected = ragas_precision._calculate_average_precision(
            [Verification(reason="", verdict=f) for f in flags]
        )
        assert precision.output_score(answer) == pytest.approx(expected, abs=1e-9), flags
        classified = [
            ContextRecallClassification(statement="s", reason="", attributed=f) for f in flags
        ]
        assert recall.output_score(answer) == ragas_recall._compute_score(classified), flags
