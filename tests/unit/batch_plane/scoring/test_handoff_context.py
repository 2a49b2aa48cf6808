"""The `handoff_context` judge metric: each hand-off of a trace, with what the sender had,
what it passed and what the receiver did and said, is sent to the judge; a trace without a
hand-off gets no score."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pathgrade.batch_plane.scoring.hallucination import judge_inputs
from pathgrade.batch_plane.scoring.judge import Judge
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.layers import layer_of
from pathgrade.batch_plane.scoring.trace_scorers import TraceScorer

from tests.support.openai_standin import OpenAIStandIn, Reply
from tests.support.traces import TraceBuilder

ASKED = "Could you give me your account number?"


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
