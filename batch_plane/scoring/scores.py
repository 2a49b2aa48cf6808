"""Score records, their deterministic ids, the `scores` table writer and the GenAI
`gen_ai.evaluation.result` event shape of a score (`pathgrade scorer --events-out`; the OTLP
export sends the same attributes as log records: transport.evaluation_records)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from pathgrade.batch_plane.scoring.judge import canonical_json
from pathgrade.schemas.genai import EVENT_EVALUATION_RESULT
from pathgrade.schemas.store import Store
from pathgrade.transport.evaluation_records import evaluation_attributes

SCORE_COLUMNS = (
    "ScoreId", "Tenant", "Metric", "Value", "Label", "Explanation", "Scorer", "ScorerVersion",
    "JudgeModel", "RubricVersion", "DatasetItemId", "RunId", "Repeat", "TraceId", "SpanId",
    "Slices", "CreatedAt",
)  # fmt: skip


@dataclass(frozen=True)
class Score:
    """One score of one metric, linked to the trace, span, dataset item and run it grades.

    `value` is in [0, 1] for pathgrade's metrics (judge scores are normalised onto the
    rubric scale); `label` is "pass"/"fail" or a scorer-specific category.
    """

    metric: str
    scorer: str
    scorer_version: str
    tenant: str
    trace_id: str
    value: float | None = None
    label: str = ""
    explanation: str = ""
    span_id: str = ""
    judge_model: str = ""
    rubric_version: str = ""
    dataset_item_id: str = ""
    run_id: str = ""
    repeat: int = 0
    slices: dict[str, str] = field(default_factory=dict)

    @property
    def score_id(self) -> str:
        return score_id(
            self.scorer, self.scorer_version, self.trace_id, self.span_id,
            self.dataset_item_id, self.run_id, self.repeat,
        )  # fmt: skip


def score_id(
    scorer: str,
    scorer_version: str,
    trace_id: str,
    span_id: str,
    dataset_item_id: str,
    run_id: str,
    repeat: int,
) -> str:
    """Hex sha256 (32 chars) of the fields that identify a score: re-scoring replaces."""
    payload = canonical_json(
        [scorer, scorer_version, trace_id, span_id, dataset_item_id, run_id, repeat]
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def score_row(score: Score, created_at_ms: int) -> list[Any]:
    """The values of one score in SCORE_COLUMNS order."""
    return [
        score.score_id, score.tenant, score.metric, score.value, score.label, score.explanation,
        score.scorer, score.scorer_version, score.judge_model, score.rubric_version,
        score.dataset_item_id, score.run_id, score.repeat, score.trace_id, score.span_id,
        dict(score.slices), created_at_ms,
    ]  # fmt: skip


def write_scores(store: Store, scores: list[Score]) -> None:
    """Insert `scores` into `scores` (idempotent by ScoreId; read with FINAL)."""
    created = time.time_ns() // 1_000_000
    store.insert("scores", [score_row(s, created) for s in scores], list(SCORE_COLUMNS))


def evaluation_event(score: Score) -> dict[str, Any]:
    """The score as an OpenTelemetry GenAI `gen_ai.evaluation.result` event: name and
    attributes, to be recorded on the evaluated span (`span_id`, else the trace's root)."""
    return {
        "name": EVENT_EVALUATION_RESULT,
        "trace_id": score.trace_id,
        "span_id": score.span_id,
        "attributes": evaluation_attributes(
            score.metric, score.value, score.label, score.explanation
        ),
    }
