"""The `handoff_context` judge metric: each hand-off of a trace, with what the sender had,
what it passed and what the receiver did and said, is sent to the judge; a trace without a
hand-off gets no score."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pathgrade.batch_plane.scoring.calibration import (
    calibrate,
    calibration_status,
    labels_digest,
    load_labels,
    store_calibration,
)
from pathgrade.batch_plane.scoring.hallucination import judge_inputs
from pathgrade.batch_plane.scoring.judge import Judge
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.layers import layer_of
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.scoring.trace_scorers import TraceScorer
from pathgrade.batch_plane.store.client import ClientStore

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.openai_standin import OpenAIStandIn, Reply
from tests.support.paths import REPO_ROOT
from tests.support.traces import TraceBuilder

ASKED = "Could you give me your account number?"
LABELS = REPO_ROOT / "examples" / "calibration" / "handoff_context.jsonl"


def billing_asks_again() -> TraceBuilder:
    """Triage looks the account up and transfers to billing, which asks for it again."""
    b = TraceBuilder(agent="")
    b.root.genai.agent_name = ""
    with b.inside(b.agent("triage")):
        b.tool("get_account", {"customer_id": "c1"})
        b.tool("transfer_to_billing", {"reason": "double charge"})
        b.handoff("billing")
    with b.inside(b.agent("billing")):
        b.chat(text=ASKED)
    return b


@pytest.fixture
def standin() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn() as server:
        yield server


def test_the_inputs_name_each_handoff_what_it_carried_and_what_the_receiver_said() -> None:
    (handoff,) = judge_inputs(billing_asks_again().build())["handoffs"]
    assert (handoff["from"], handoff["to"], handoff["kind"]) == ("triage", "billing", "transfer")
    assert handoff["sender_calls"] == [
        {"name": "get_account", "arguments": {"customer_id": "c1"}},
        {"name": "transfer_to_billing", "arguments": {"reason": "double charge"}},
    ]
    assert handoff["passed"] == {"reason": "double charge"}  # the transfer call's arguments
    assert handoff["receiver_calls"] == [] and handoff["receiver_said"] == [ASKED]


def test_the_judge_grades_a_turn_with_a_handoff_and_a_turn_without_one_is_not_scored(
    standin: OpenAIStandIn,
) -> None:
    standin.enqueue(Reply(content={"score": 2, "explanation": "billing asked again"}))
    scorer = TraceScorer(("handoff_context",), Judge(JudgeEndpoint(standin.url, "m"), store=None))
    (score,) = scorer.score(billing_asks_again().build())
    assert (score.metric, score.label, score.rubric_version) == (
        "handoff_context", "fail", "handoff_context@1"
    )  # fmt: skip
    assert score.value == pytest.approx(1 / 3)
    prompt = standin.requests[0]["messages"][0]["content"]
    assert ASKED in prompt and json.dumps({"customer_id": "c1"}) in prompt
    single = TraceBuilder()
    single.tool("lookup_order", {"order_id": "A1"})
    assert scorer.score(single.build()) == []
    assert len(standin.requests) == 1
    assert layer_of("handoff_context") == "hand-off"


def test_the_shipped_labels_calibrate_the_rubric_as_the_others_are(
    tmp_path: Path, store: ClientStore
) -> None:
    """`pathgrade judge calibrate --rubric handoff_context@1 --labels
    examples/calibration/handoff_context.jsonl`: the labels load against the rubric, and a
    judge that passes exactly the hand-offs the humans passed agrees fully."""
    rubric = load_rubric("handoff_context@1")
    labels = load_labels(LABELS, rubric)
    passing = {label.item_id for label in labels if label.passed(rubric)}
    assert passing == {"clean-carried", "clean-history", "redo-lookup"}

    def answer(request: dict) -> dict:  # the humans' verdict, read back from the prompt
        prompt = request["messages"][0]["content"]
        clean = "refunded" in prompt.lower() and "could you" not in prompt.lower()
        right = "C-1043" not in prompt
        return {"score": 4 if clean and right else 1, "explanation": "scripted"}

    with OpenAIStandIn(answer=answer) as server:
        judge = Judge(JudgeEndpoint(server.url, "m-handoff"), store=store)
        result = calibrate(judge, rubric, labels, repeats=1, labels_sha256=labels_digest(labels))
    assert (result.items, result.agreement, result.kappa) == (8, 1.0, 1.0)
    store_calibration(store, result)
    assert calibration_status(store, "m-handoff", "handoff_context@1")
