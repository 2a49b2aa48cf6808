"""DeepEval's contextual precision and recall on given verdicts, offline: a scripted model
(a `DeepEvalBaseLLM`) answers each verdict prompt with the verdicts its texts are marked
with, so DeepEval's own code turns them into its score. Runs in DeepEval's venv:

    python -m tests.integration.reference.deepeval_scores < cases.json > scores.json

Input: {"precision": [[true, false, ...], ...], "recall": [[...], ...]}; output: the same
shape with DeepEval's scores.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] = "YES"

from deepeval.metrics import ContextualPrecisionMetric, ContextualRecallMetric
from deepeval.models import DeepEvalBaseLLM
from deepeval.test_case import LLMTestCase


class Scripted(DeepEvalBaseLLM):
    """Answers a verdict prompt with one verdict per `[yes]` / `[no]` mark in it."""

    def __init__(self) -> None:
        pass

    def load_model(self) -> Scripted:
        return self

    def get_model_name(self) -> str:
        return "scripted"

    def generate(self, prompt: str, schema: Any = None) -> Any:
        marks = re.findall(r"\[(yes|no)\]", prompt)
        data = {"verdicts": [{"verdict": m, "reason": "-"} for m in marks], "reason": "-"}
        return schema.model_validate(data) if schema is not None else json.dumps(data)

    async def a_generate(self, prompt: str, schema: Any = None) -> Any:
        return self.generate(prompt, schema)


def mark(verdict: bool) -> str:
    return "[yes]" if verdict else "[no]"


def precision(verdicts: list[bool]) -> float:
    metric = ContextualPrecisionMetric(model=Scripted(), include_reason=False, async_mode=False)
    chunks = [f"chunk {n} {mark(v)}" for n, v in enumerate(verdicts)]
    case = LLMTestCase(input="q", actual_output="a", expected_output="e", retrieval_context=chunks)
    return float(metric.measure(case, _show_indicator=False))


def recall(verdicts: list[bool]) -> float:
    metric = ContextualRecallMetric(model=Scripted(), include_reason=False, async_mode=False)
    expected = " ".join(f"Statement {n} {mark(v)}." for n, v in enumerate(verdicts))
    case = LLMTestCase(
        input="q", actual_output="a", expected_output=expected, retrieval_context=["c"]
    )
    return float(metric.measure(case, _show_indicator=False))


def main() -> int:
    cases = json.load(sys.stdin)
    json.dump(
        {
            "precision": [precision(v) for v in cases["precision"]],
            "recall": [recall(v) for v in cases["recall"]],
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
