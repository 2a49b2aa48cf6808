"""Score records as the gate reads them (from the store or a JSONL score file)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pathgrade.batch_plane.scoring.layers import by_layer, layer_of
from pydantic import BaseModel, ConfigDict, Field


class ScoreRecord(BaseModel):
    """One score: a metric's value for one repeat of one dataset item, with its slice values.

    `value` None is an attempt the metric could not decide (`label` says why, e.g.
    `cannot_decide` or `judge_error`): the gate counts it apart and never as a pass.
    `item_id` must be unique across the suite's datasets. `layer` is the layer its metric
    grades (`schemas.layers`), as `scores export` writes it; the gate reads the layer from
    the metric, not from the file. Other keys (span ids, ...) are accepted and ignored.
    """

    model_config = ConfigDict(frozen=True)

    item_id: str = Field(min_length=1)
    repeat: int = Field(ge=0)
    metric: str = Field(min_length=1)
    value: float | None = Field(allow_inf_nan=False)
    label: str = ""
    explanation: str = ""
    trace_id: str = ""
    slices: dict[str, str] = Field(default_factory=dict)
    layer: str = ""


def item_means(records: Iterable[ScoreRecord]) -> dict[str, float]:
    """Each item's mean over its repeats that have a value."""
    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for record in records:
        if record.value is None:
            continue
        totals[record.item_id] += record.value
        counts[record.item_id] += 1
    return {item: totals[item] / counts[item] for item in totals}


def by_layer_of_metric(records: Iterable[ScoreRecord]) -> list[tuple[str, list[ScoreRecord]]]:
    """The records grouped by the layer their metric grades, in report order, each with its
    `layer` set."""
    labelled = [record.model_copy(update={"layer": layer_of(record.metric)}) for record in records]
    return by_layer(labelled, lambda record: record.layer)
