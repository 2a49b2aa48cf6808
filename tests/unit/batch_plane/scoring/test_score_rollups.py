"""The online scorer's counts for the score monitors: one per score with a value, under its
metric and rounded value, in the bucket of the turn's end, per slice value."""

from __future__ import annotations

from pathgrade.batch_plane.scoring.score_rollups import score_rollup_rows
from pathgrade.batch_plane.scoring.scores import Score
from pathgrade.detectors.monitor_policy import MonitorsPolicy
from pathgrade.schemas.rollups import ROLLUP_COLUMNS
from pathgrade.schemas.sampled import SampledTrace

from tests.support.traces import TraceBuilder


def test_each_valued_score_counts_once_per_slice_in_the_bucket_of_the_turns_end() -> None:
    builder = TraceBuilder("ab" * 16, root_attributes={"app.intent": "refund"})
    trace = builder.build()
    assert trace.root is not None
    trace.root.end_ns = 125 * 10**9 + 7
    sampled = SampledTrace(
        trace_id=trace.trace_id, tenant="default", service="support", agent="support-agent",
        risk_tier="high", reasons=["base_rate"], conversation_id="", sampled_at_ns=1,
    )  # fmt: skip
    base = {"scorer": "judge:f", "scorer_version": "1", "tenant": "default",
            "trace_id": trace.trace_id}  # fmt: skip
    scores = [
        Score("faithfulness", value=2 / 3, **base),
        Score("task_completion", value=None, label="judge_error", **base),  # not counted
    ]
    monitors = MonitorsPolicy(bucket_s=60, slices=["app.intent", "language"])
    rows = [dict(zip(ROLLUP_COLUMNS, r, strict=True)) for r in score_rollup_rows(
        sampled, trace, scores, monitors)]  # fmt: skip
    assert [(r["Name"], r["Slice"], r["Value"], r["BucketStart"], r["Count"]) for r in rows] == [
        ("faithfulness", "", 0.667, 120, 1),
        ("faithfulness", "app.intent=refund", 0.667, 120, 1),
    ]
    assert {(r["Tenant"], r["Source"], r["Service"], r["Agent"]) for r in rows} == {
        ("default", "scores", "support", "support-agent")
    }
    assert rows[0]["Examples"] == [f"{'ab' * 16}/{1:016x}"]
