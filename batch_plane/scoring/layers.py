"""The layer each metric grades (`schemas.layers`), and metrics grouped by layer.

Detectors declare theirs on their rule, per-case checks on their check (`check.<name>`),
judge metrics in their rubric; the offline metrics computed here and in
`batch_plane.evaluation` declare theirs in `METRIC_LAYERS`. Anything else (efficiency, a
custom metric) is `OTHER`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from pathgrade.batch_plane.scoring.checks import CHECKS
from pathgrade.batch_plane.scoring.rubrics import RubricError, load_rubric
from pathgrade.detectors import REGISTRY
from pathgrade.schemas.layers import LAYERS, OTHER, Layer

METRIC_LAYERS: dict[str, Layer] = {
    "context_precision": "retrieval",
    "context_recall": "retrieval",
    "plan_adherence": "plan",
    "step_efficiency": "plan",
    "tool_correctness": "tool use",
    "argument_correctness": "tool use",
    "trajectory_match": "tool use",
    "sound": "tool use",
    "reference_match": "answer",
    "goal_completed": "answer",
    "checks": "answer",
    "claimed_actions": "answer",
    "response_consistency_lexical": "answer",
}
"""The layers of the metrics no rule, check or rubric declares."""

CHECK_PREFIX = "check."
T = TypeVar("T")


def layer_of(metric: str) -> str:
    """The layer `metric` grades, or `OTHER` when it declares none."""
    if metric in METRIC_LAYERS:
        return METRIC_LAYERS[metric]
    if metric in REGISTRY:
        return REGISTRY[metric].layer
    if metric.startswith(CHECK_PREFIX) and metric[len(CHECK_PREFIX) :] in CHECKS:
        return CHECKS[metric[len(CHECK_PREFIX) :]].layer
    try:
        return load_rubric(metric).layer
    except RubricError:
        return OTHER


def layer_rank(layer: str) -> int:
    """The position of `layer` in reports: `LAYERS` order, then `OTHER`."""
    return LAYERS.index(layer) if layer in LAYERS else len(LAYERS)  # type: ignore[arg-type]


def by_layer(items: Iterable[T], layer: Callable[[T], str]) -> list[tuple[str, list[T]]]:
    """`items` grouped by their `layer`, in report order; each group keeps the items'
    order, and a layer without items is left out."""
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(layer(item), []).append(item)
    return sorted(groups.items(), key=lambda group: layer_rank(group[0]))
