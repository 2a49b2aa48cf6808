"""The retrieval and plan metrics of one offline attempt, from its item's references and
what the agent said it did (`AgentTurn.retrieved_contexts`, `AgentTurn.plan`):

- `context_precision`, `context_recall` when the item names reference contexts: by ids
  when it names reference ids and the agent's chunks have ids, else by text when it names
  reference texts and the chunks have text; without the agent's chunks (or the kind the
  reference needs), no value (`cannot_decide`); an item naming no reference context is
  judged instead (`judged_retrieval`);
- `plan_adherence` when the agent stated a plan: the plan against the tool path;
- `step_efficiency` when the item expects calls: the tool path against them.

Each value is (score or None, explanation). The functions are `batch_plane.scoring`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from pathgrade.batch_plane.agents.adapters import AgentTurn
from pathgrade.batch_plane.evaluation.datasets import DatasetItem
from pathgrade.batch_plane.scoring.plan_metrics import plan_adherence, step_efficiency
from pathgrade.batch_plane.scoring.retrieval import (
    precision_by_ids,
    precision_by_text,
    recall_by_ids,
    recall_by_text,
)

CANNOT_DECIDE = "cannot_decide"
"""The label of a metric stored without a value because it could not be decided."""
Measured = dict[str, tuple[float | None, str]]
"""Metric -> (value, explanation); None: could not decide (the explanation says why)."""


def retrieval_metrics(item: DatasetItem, turn: AgentTurn | None) -> Measured:
    """Context precision and recall of the attempt (see the module doc)."""
    if not (item.reference_context_ids or item.reference_contexts):
        return {}
    chunks = turn.retrieved_contexts if turn is not None else None
    ids = [c.id for c in chunks or () if c.id]
    texts = [c.text for c in chunks or () if c.text]
    if chunks is not None and item.reference_context_ids and (ids or not chunks):
        return {
            "context_precision": _said(precision_by_ids(ids, item.reference_context_ids), "ids"),
            "context_recall": _said(recall_by_ids(ids, item.reference_context_ids), "ids"),
        }
    if chunks is not None and item.reference_contexts and (texts or not chunks):
        return {
            "context_precision": _said(precision_by_text(texts, item.reference_contexts), "text"),
            "context_recall": _said(recall_by_text(texts, item.reference_contexts), "text"),
        }
    why = (
        "the agent did not say what it retrieved (`retrieved_contexts` of its turn)"
        if chunks is None
        else "the retrieved chunks carry neither the ids nor the texts the reference names"
    )
    return {"context_precision": (None, why), "context_recall": (None, why)}


def _said(value: float | None, by: str) -> tuple[float | None, str]:
    if value is None:
        return None, "nothing was retrieved to judge"
    return value, f"against the reference contexts by {by}"


def plan_metrics(item: DatasetItem, turn: AgentTurn | None, path: Sequence[str]) -> Measured:
    """Plan adherence (when the agent stated a plan) and step efficiency (when the item
    expects calls) of the tool path `path`."""
    found: Measured = {}
    plan = turn.plan if turn is not None else None
    if plan:
        found["plan_adherence"] = (
            plan_adherence(plan, path),
            f"stated plan {' -> '.join(plan)}; path {' -> '.join(path) or '(no calls)'}",
        )
    if item.expected_tool_calls:
        needed = [call["name"] for call in item.expected_tool_calls]
        found["step_efficiency"] = (
            step_efficiency(path, needed),
            f"{len(path)} steps taken, {len(needed)} needed",
        )
    return found
