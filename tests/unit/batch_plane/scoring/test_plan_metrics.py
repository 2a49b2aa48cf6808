"""Plan adherence and step efficiency: each anchor of DeepEval's five-point scale, decided
on step names (batch_plane/scoring/plan_metrics.py)."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.scoring.plan_metrics import plan_adherence, step_efficiency

PLAN = ["get_account", "check_invoice", "open_dispute", "reply"]


@pytest.mark.parametrize(
    ("path", "score"),
    [
        (PLAN, 1.0),  # every step, in order, nothing else
        (["get_account", "check_invoice", "reply"], 0.75),  # one step skipped
        ([*PLAN[:2], "search_kb", *PLAN[2:]], 0.75),  # one extra step
        (["check_invoice", "get_account", "open_dispute", "reply"], 0.75),  # two swapped
        (["get_account", "check_invoice", "search_kb"], 0.5),  # half the plan, one extra
        (["get_account", "x", "check_invoice", "y"], 0.25),  # several extra steps
        (["reply"], 0.25),  # less than half the plan
        (["search_kb", "lookup_order"], 0.0),  # no planned step
        ([], 0.0),
    ],
)
def test_plan_adherence_on_deepevals_scale(path: list[str], score: float) -> None:
    assert plan_adherence(PLAN, path) == score


def test_no_plan_stated_scores_one_as_deepeval_does() -> None:
    assert plan_adherence([], ["anything"]) == 1.0


@pytest.mark.parametrize(
    ("path", "score"),
    [
        (["get_account", "open_dispute"], 1.0),
        ([], 1.0),  # nothing taken: no waste (completeness is another metric's)
        (["get_account", "get_account", "open_dispute"], 0.75),  # one repeat
        (["get_account", "search_kb", "lookup_order", "open_dispute"], 0.5),  # half unneeded
        (["get_account", "a", "b", "c"], 0.25),  # most unneeded
        (["search_kb"], 0.0),  # nothing needed
    ],
)
def test_step_efficiency_on_deepevals_scale(path: list[str], score: float) -> None:
    assert step_efficiency(path, ["get_account", "open_dispute"]) == score
