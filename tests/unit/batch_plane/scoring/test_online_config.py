"""The online scorer's config takes a detector policy or none, and names the field of
anything else (it checks the policy without importing the detectors at module load)."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.scoring.online_config import OnlineScorerConfig
from pathgrade.detectors.policy import default_policy
from pydantic import ValidationError


def test_a_policy_or_none_is_taken_and_anything_else_is_refused_naming_the_field() -> None:
    policy = default_policy()
    assert OnlineScorerConfig(bootstrap_servers="b:9092", policy=policy).policy is policy
    assert OnlineScorerConfig(bootstrap_servers="b:9092").policy is None
    with pytest.raises(ValidationError, match="policy: expected a detector Policy, got str"):
        OnlineScorerConfig(bootstrap_servers="b:9092", policy="policy.yaml")
