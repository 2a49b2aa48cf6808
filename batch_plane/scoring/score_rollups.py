"""The online scorer's counts for the score monitors (`schemas.rollups`, Source `scores`):
each score with a value counts once under its metric and value (rounded to SCORE_DIGITS),
in the bucket of the scored turn's end, for the sampled turn's service and agent, for all
turns and per value of every slice the policy's monitors keep. A score without a value (a
judge that failed) is not counted: it is no evidence of a drop."""

from __future__ import annotations

from typing import Any

from pathgrade.batch_plane.scoring.scores import Score
from pathgrade.content.turn_rollups import turn_end_ns, turn_example, turn_slices
from pathgrade.detectors.monitor_policy import MonitorsPolicy
from pathgrade.schemas.model import Trace
from pathgrade.schemas.rollups import ROLLUP_COLUMNS, SCORE_DIGITS, RollupKey, bucket_start
from pathgrade.schemas.sampled import SampledTrace
from pathgrade.schemas.store import Store


def score_rollup_rows(
    sampled: SampledTrace, turn: Trace, scores: list[Score], monitors: MonitorsPolicy
) -> list[list[Any]]:
    """The `monitor_rollups` rows of one scored turn (ROLLUP_COLUMNS order)."""
    bucket = bucket_start(turn_end_ns(turn), monitors.bucket_s)
    example = [turn_example(turn)]
    return [
        RollupKey(
            turn.tenant, "scores", score.metric, sampled.service, sampled.agent, slice_,
            bucket, round(score.value, SCORE_DIGITS),
        ).row(1, example)
        for score in scores
        if score.value is not None
        for slice_ in turn_slices(turn, monitors.slices)
    ]  # fmt: skip


def write_score_rollups(
    store: Store,
    sampled: SampledTrace,
    turn: Trace,
    scores: list[Score],
    monitors: MonitorsPolicy,
) -> None:
    """Insert the rows of one scored turn (none: nothing)."""
    rows = score_rollup_rows(sampled, turn, scores, monitors)
    if rows:
        store.insert("monitor_rollups", rows, list(ROLLUP_COLUMNS))
