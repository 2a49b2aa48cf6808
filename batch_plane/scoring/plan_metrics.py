"""Plan metrics: plan adherence (did the path follow the plan the agent stated) and step
efficiency (how many of its steps were needed), on DeepEval's scale. Pure functions.

DeepEval's `PlanAdherenceMetric` and `StepEfficiencyMetric` ask a judge for a score on a
five-point scale (1.0, 0.75, 0.5, 0.25, 0.0) with written anchors; their deterministic
parts are that a trace stating no plan scores 1 and that `strict_mode` turns a score below
the threshold into 0. Here each anchor is decided on step names (tool names, in order),
as docs/trajectory.md sets out:

plan adherence (plan: the steps the agent stated; path: the steps it took)
- 1.0: every planned step taken, in order, and nothing else;
- 0.75: one deviation: one planned step skipped, one extra step, or two steps swapped;
- 0.5: more deviations, but at least half the plan taken in order and at most one extra
  step;
- 0.25: less than half the plan taken in order, or several extra steps;
- 0.0: no planned step taken in order;
- no plan stated: 1.0 (DeepEval's rule).

step efficiency (path: the steps taken; needed: the steps the task needs, a reference)
- 1.0: no step beyond the needed ones (nothing taken counts as no waste);
- 0.75: one unneeded step;
- 0.5: more, but at most half the path unneeded;
- 0.25: more than half the path unneeded;
- 0.0: no step of the path was needed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence


def plan_adherence(plan: Sequence[str], path: Sequence[str]) -> float:
    """How closely `path` followed `plan`, on DeepEval's scale (see the module doc)."""
    if not plan:
        return 1.0
    followed = _in_order(plan, path)
    missing, extra = len(plan) - followed, len(path) - followed
    if followed == 0:
        return 0.0
    if missing == 0 and extra == 0:
        return 1.0
    swapped = missing == 1 and extra == 1 and Counter(plan) == Counter(path)
    if missing + extra == 1 or swapped:
        return 0.75
    if 2 * followed >= len(plan) and extra <= 1:
        return 0.5
    return 0.25


def step_efficiency(path: Sequence[str], needed: Sequence[str]) -> float:
    """How few of `path`'s steps were beyond the `needed` ones, on DeepEval's scale (see
    the module doc). Counting is by multiset: a needed step repeated is unneeded once."""
    if not path:
        return 1.0
    wanted = Counter(needed)
    necessary = sum(min(count, wanted[step]) for step, count in Counter(path).items())
    unneeded = len(path) - necessary
    if necessary == 0:
        return 0.0
    if unneeded == 0:
        return 1.0
    if unneeded == 1:
        return 0.75
    return 0.5 if 2 * unneeded <= len(path) else 0.25


def _in_order(plan: Sequence[str], path: Sequence[str]) -> int:
    """How many planned steps the path took in the plan's order (the longest common
    subsequence's length)."""
    previous = [0] * (len(path) + 1)
    for step in plan:
        current = [0]
        for j, taken in enumerate(path, start=1):
            current.append(previous[j - 1] + 1 if step == taken else max(previous[j], current[-1]))
        previous = current
    return previous[-1]
