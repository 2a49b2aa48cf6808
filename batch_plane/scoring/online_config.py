"""`OnlineScorerConfig` and the metrics each risk tier gets (a light module: the command
line reads the config's defaults and descriptions for `pathgrade scorer`'s flags, so the
detectors, which a `Policy` needs, are imported only when a config is validated)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pathgrade.schemas.topics import SAMPLED_TOPIC, SCORER_GROUP
from pathgrade.transport.message_auth import MESSAGE_KEY_HELP, MessageKeySetting
from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from pathgrade.detectors.policy import Policy

TIER_METRICS: dict[str, tuple[str, ...]] = {
    "low": ("claimed_actions",),
    "medium": ("claimed_actions", "task_completion"),
    "high": ("claimed_actions", "task_completion", "faithfulness", "unsupported_claims"),
    "critical": (
        "claimed_actions", "task_completion", "faithfulness", "unsupported_claims",
        "plan_quality",
    ),
}  # fmt: skip
"""The scoring policy: metrics per risk tier (judge metrics only when a judge is set)."""


class OnlineScorerConfig(BaseModel):
    """Where to read, what each tier gets, and how long to wait for a trace to be stored."""

    model_config = ConfigDict(extra="forbid")

    bootstrap_servers: str = Field(description="Kafka bootstrap servers, HOST:PORT[,HOST:PORT]")
    topic: str = Field(SAMPLED_TOPIC, description="topic of sampled traces read")
    group_id: str = Field(SCORER_GROUP, description="consumer group")
    tier_metrics: Mapping[str, tuple[str, ...]] = Field(
        default_factory=lambda: TIER_METRICS, description="metrics per risk tier"
    )
    policy: Any = Field(  # a `Policy` or None (`_a_policy`)
        None,
        description="detector policy whose `scorers:` (per tier, service, agent) override "
        "`tier_metrics`",
    )
    trace_wait_s: float = Field(
        30.0, description="how long to wait for a sampled trace to be stored"
    )
    session_timeout_ms: int = Field(6000, description="consumer group session timeout")
    consumer_options: dict[str, Any] = Field(
        default_factory=dict, description="further kafka-python consumer settings"
    )
    message_key: MessageKeySetting = Field(None, description=MESSAGE_KEY_HELP)

    @field_validator("policy")
    @classmethod
    def _a_policy(cls, value: object) -> Policy | None:
        """`policy` is a detector `Policy` or None (checked here rather than by its
        annotation, so the module imports no detectors)."""
        from pathgrade.detectors.policy import Policy

        if value is None or isinstance(value, Policy):
            return value
        raise ValueError(f"policy: expected a detector Policy, got {type(value).__name__}")
