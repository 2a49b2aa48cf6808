"""End-state oracles: goal_completed from the sandbox's state, never from the trace."""

from __future__ import annotations

from pathgrade.batch_plane.agents.adapters import AgentTurn
from pathgrade.batch_plane.evaluation.datasets import DatasetItem
from pathgrade.batch_plane.evaluation.end_state import goal_completed
from pathgrade.batch_plane.evaluation.runs import Attempt, score_attempt
from pathgrade.batch_plane.scoring.checks import CheckOutcome

from tests.support.traces import TraceBuilder

STATE = {"account": {"plan": "basic", "refunds": ["A2001"], "tickets": []}}


def test_each_expected_path_is_compared_with_json_equality() -> None:
    assert goal_completed({"account.plan": "basic", "account.refunds.0": "A2001"}, STATE).passed
    assert goal_completed({"account.tickets": []}, STATE).passed
    assert goal_completed({"account.plan": "premium", "account.owner": "ann"}, STATE) == (
        CheckOutcome.fail(
            "End state: account.plan is 'basic', expected 'premium'; account.owner is absent, "
            "expected 'ann'."
        )
    )
    assert not goal_completed({"account.refunds.3": "A2001"}, STATE).passed


def test_no_state_cannot_decide_and_says_why() -> None:
    assert goal_completed({"account.plan": "x"}, None) == CheckOutcome.undecided(
        "The agent exposes no end state."
    )
    assert goal_completed({"a": 1}, None, "agent at http://x/state: 500").reason == (
        "agent at http://x/state: 500"
    )


def test_goal_completed_comes_from_the_oracle_not_from_the_trace() -> None:
    """The same trace scores goal_completed 1 or 0 with the sandbox's state alone; a guard
    that refused (no write at all) is sound and not completed."""
    item = DatasetItem(
        item_id="plan", input="premium please", end_state={"account.plan": "premium"}
    )
    refused = TraceBuilder("3" * 32, answer="Sorry, I cannot switch you to premium.")
    refused.chat(text="Sorry, I cannot switch you to premium.")
    trace = refused.build()

    def scores(state: dict | None) -> dict[str, float | None]:
        attempt = Attempt(item, 0, AgentTurn(response="Sorry"), end_state=state)
        return {s.metric: s.value for s in score_attempt(attempt, trace, "run-g")}

    assert scores({"account": {"plan": "premium"}})["goal_completed"] == 1.0
    guarded = scores({"account": {"plan": "basic"}})
    assert guarded["goal_completed"] == 0.0 and guarded["sound"] == 1.0
    assert scores(None)["goal_completed"] is None  # the agent exposed no state
