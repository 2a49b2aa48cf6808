"""The policy assigns the online scorer's metrics per risk tier, service or agent."""

from __future__ import annotations

from pathlib import Path

from pathgrade.batch_plane.scoring.online import metrics_for
from pathgrade.batch_plane.scoring.online_config import TIER_METRICS
from pathgrade.detectors import load_policy
from pathgrade.schemas.sampled import SampledTrace

POLICY = """
tiers:
  high:
    scorers: [claimed_actions, faithfulness]
services:
  billing:
    scorers: [claimed_actions, task_completion, unsupported_claims]
"""


def sampled(tier: str, service: str = "support") -> SampledTrace:
    return SampledTrace(
        trace_id="ab" * 16, tenant="acme", service=service, agent="a", risk_tier=tier,
        reasons=["base_rate"], conversation_id="", sampled_at_ns=1,
    )  # fmt: skip


def test_policy_scorers_override_the_tier_default(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    policy = load_policy(path)
    assert metrics_for(sampled("high"), policy, TIER_METRICS) == (
        "claimed_actions", "faithfulness",
    )  # fmt: skip
    assert metrics_for(sampled("low", "billing"), policy, TIER_METRICS) == (
        "claimed_actions", "task_completion", "unsupported_claims",
    )  # fmt: skip
    assert metrics_for(sampled("medium"), policy, TIER_METRICS) == TIER_METRICS["medium"]


def test_without_a_policy_the_tier_default_applies_and_unknown_tiers_get_none() -> None:
    assert metrics_for(sampled("high"), None, TIER_METRICS) == TIER_METRICS["high"]
    assert metrics_for(sampled("extreme"), None, TIER_METRICS) is None


def test_a_wrong_scorers_value_names_line_and_field(tmp_path: Path) -> None:
    import pytest
    from pathgrade.detectors import PolicyError

    path = tmp_path / "policy.yaml"
    path.write_text("tiers:\n  high:\n    scorers: claimed_actions\n")
    with pytest.raises(PolicyError, match=r"policy.yaml:3: tiers.high.scorers"):
        load_policy(path)
