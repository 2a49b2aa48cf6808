"""Context precision and recall: the vectors RAGAS publishes in its docs reproduced, and the
installed RAGAS run side by side on generated cases (its rule-based metrics and the
formula its LLM metrics apply to the judge's verdicts). DeepEval's metrics are reproduced
in tests/integration/test_deepeval_reference.py (DeepEval runs in its own venv)."""

from __future__ import annotations

import asyncio
import random

import pytest
from pathgrade.batch_plane.scoring.retrieval import (
    context_precision,
    context_recall,
    precision_by_ids,
    precision_by_text,
    recall_by_ids,
    recall_by_text,
    similarity,
)
from ragas import SingleTurnSample
from ragas.metrics import (
    IDBasedContextPrecision,
    IDBasedContextRecall,
    LLMContextPrecisionWithReference,
    NonLLMContextPrecisionWithReference,
    NonLLMContextRecall,
)
from ragas.metrics._context_precision import Verification

EIFFEL = "The Eiffel Tower is located in Paris."
BRANDENBURG = "The Brandenburg Gate is located in Berlin."
CAPITAL = "Paris is the capital of France."
LANDMARK = "The Eiffel Tower is one of the most famous landmarks in Paris."
RAGAS_EPSILON = 1e-9
"""RAGAS adds 1e-10 to the precision's denominator: its 1.0 prints as 0.9999999999."""


def test_ragas_context_precision_examples() -> None:
    """docs/concepts/metrics/available_metrics/context_precision.md (ragas 3e28e9de): the
    judge finds Eiffel relevant and Brandenburg not; RAGAS prints 0.9999999999 with the
    relevant chunk first, 0.49999999995 with it second, 0.9999999999 for it alone."""
    assert context_precision([True, False]) == pytest.approx(0.9999999999, abs=RAGAS_EPSILON)
    assert context_precision([False, True]) == pytest.approx(0.49999999995, abs=RAGAS_EPSILON)
    assert context_precision([True]) == pytest.approx(0.9999999999, abs=RAGAS_EPSILON)


def test_ragas_non_llm_and_id_based_examples() -> None:
    """The same page and context_recall.md: the non-LLM and id-based examples."""
    assert precision_by_text([EIFFEL], [CAPITAL, LANDMARK]) == pytest.approx(
        0.9999999999, abs=RAGAS_EPSILON
    )
    assert recall_by_text([CAPITAL], [CAPITAL, LANDMARK]) == 0.5
    retrieved, reference = (
        ["doc_1", "doc_2", "doc_3", "doc_4"],
        ["doc_1", "doc_4", "doc_5", "doc_6"],
    )
    assert precision_by_ids(retrieved, reference) == 0.5
    assert recall_by_ids(["doc_1", "doc_2", "doc_3"], reference) == 0.25


def test_ragas_context_recall_example() -> None:
    """context_recall.md: the reference's one claim is attributed to the context: 1.0."""
    assert context_recall([True]) == 1.0


def test_edges_and_bad_verdicts() -> None:
    assert context_precision([]) == 0.0 and context_precision([False, False]) == 0.0
    assert context_recall([]) is None
    assert precision_by_ids([], ["a"]) is None and recall_by_ids(["a"], []) is None
    assert precision_by_ids([1, "1"], ["1"]) == 1.0  # ids compare as text, as a set
    assert precision_by_text([EIFFEL], []) is None and recall_by_text([], [EIFFEL]) == 0.0
    assert similarity(EIFFEL, EIFFEL) == 1.0
    with pytest.raises(ValueError, match=r"verdicts\[1\]: expected true/false or 1/0, got 2"):
        context_precision([1, 2])
    with pytest.raises(ValueError, match=r"verdicts\[0\]: expected true/false or 1/0"):
        context_recall([0.5])


def _run(metric: object, sample: SingleTurnSample) -> float:
    return asyncio.run(metric.single_turn_ascore(sample))  # type: ignore[attr-defined]


def test_the_average_precision_is_ragas_on_generated_verdicts() -> None:
    rng = random.Random(44)
    ragas = LLMContextPrecisionWithReference()
    for _ in range(500):
        verdicts = [rng.random() < 0.5 for _ in range(rng.randint(0, 8))]
        expected = ragas._calculate_average_precision(
            [Verification(reason="", verdict=int(v)) for v in verdicts]
        )
        assert context_precision(verdicts) == pytest.approx(expected, abs=RAGAS_EPSILON), verdicts


WORDS = ("the", "tower", "paris", "gate", "berlin", "is", "in", "located", "capital", "a")


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))


def test_text_and_id_relevance_are_ragas_on_generated_cases() -> None:
    """RAGAS's non-LLM metrics (rapidfuzz's Levenshtein, threshold 0.5: `>=` for precision,
    `>` for recall) and its id-based ones, 300 generated cases each."""
    rng = random.Random(45)
    precision, recall = NonLLMContextPrecisionWithReference(), NonLLMContextRecall()
    for _ in range(300):
        retrieved = [_text(rng) for _ in range(rng.randint(1, 4))]
        reference = [_text(rng) for _ in range(rng.randint(1, 3))]
        sample = SingleTurnSample(retrieved_contexts=retrieved, reference_contexts=reference)
        assert precision_by_text(retrieved, reference) == pytest.approx(
            _run(precision, sample), abs=RAGAS_EPSILON
        ), (retrieved, reference)
        assert recall_by_text(retrieved, reference) == _run(recall, sample)
        ids = [rng.choice(["a", "b", "c", 1, 2]) for _ in range(rng.randint(1, 5))]
        wanted = [rng.choice(["a", "b", "d", 1, "2"]) for _ in range(rng.randint(1, 4))]
        by_id = SingleTurnSample(retrieved_context_ids=ids, reference_context_ids=wanted)
        assert precision_by_ids(ids, wanted) == _run(IDBasedContextPrecision(), by_id)
        assert recall_by_ids(ids, wanted) == _run(IDBasedContextRecall(), by_id)
