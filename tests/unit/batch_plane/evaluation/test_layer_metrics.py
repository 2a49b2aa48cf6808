"""The retrieval and plan metrics of an offline attempt, from the item and the agent's turn."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.agents.adapters import AgentTurn, RetrievedContext
from pathgrade.batch_plane.evaluation.datasets import DatasetItem
from pathgrade.batch_plane.evaluation.layer_metrics import plan_metrics, retrieval_metrics


def turn(**fields: object) -> AgentTurn:
    return AgentTurn(response="done", **fields)


def test_retrieval_by_ids_ranks_the_relevant_chunks() -> None:
    item = DatasetItem(item_id="a", input="q", reference_context_ids=["kb-1", "kb-2"])
    chunks = [RetrievedContext(id="kb-9"), RetrievedContext(id="kb-1")]
    measured = retrieval_metrics(item, turn(retrieved_contexts=chunks))
    assert measured["context_precision"][0] == pytest.approx(0.5)
    assert measured["context_recall"][0] == pytest.approx(0.5)
    assert "by ids" in measured["context_recall"][1]


def test_retrieval_by_text_when_the_reference_names_texts() -> None:
    item = DatasetItem(item_id="a", input="q", reference_contexts=["Refunds take five days."])
    chunks = [RetrievedContext(text="Refunds take five days."), RetrievedContext(text="Hours")]
    measured = retrieval_metrics(item, turn(retrieved_contexts=chunks))
    assert measured["context_precision"] == (1.0, "against the reference contexts by text")
    assert measured["context_recall"][0] == 1.0


def test_retrieval_cannot_decide_without_the_agents_chunks_or_the_kind_needed() -> None:
    item = DatasetItem(item_id="a", input="q", reference_context_ids=["kb-1"])
    unsaid = retrieval_metrics(item, turn())
    value, why = unsaid["context_precision"]
    assert value is None and "did not say" in why
    texts_only = retrieval_metrics(item, turn(retrieved_contexts=[RetrievedContext(text="x")]))
    assert texts_only["context_recall"][0] is None and "neither" in texts_only["context_recall"][1]
    assert retrieval_metrics(DatasetItem(item_id="b", input="q"), turn()) == {}


def test_plan_adherence_needs_a_stated_plan_and_step_efficiency_expected_calls() -> None:
    item = DatasetItem(item_id="a", input="q", expected_tool_calls=[{"name": "lookup"}])
    path = ["lookup", "lookup_again"]
    measured = plan_metrics(item, turn(plan=["lookup"]), path)
    assert measured["plan_adherence"][0] == 0.75  # one extra step
    assert measured["step_efficiency"] == (0.75, "2 steps taken, 1 needed")
    assert plan_metrics(DatasetItem(item_id="b", input="q"), turn(), path) == {}
