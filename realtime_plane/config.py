"""RealtimeConfig: every setting of the realtime plane, validated at the edge."""

from __future__ import annotations

from typing import Annotated

from pathgrade.schemas.topics import (
    ALERTS_TOPIC,
    REALTIME_GROUP,
    SAMPLED_TOPIC,
    SPANS_TOPIC,
    TURNS_TOPIC,
)
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class SamplerRates(BaseModel):
    """Sampling rates: a base rate per risk tier, and a rate per flag of a trace."""

    model_config = ConfigDict(extra="forbid")

    tiers: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(
        default={"low": 0.01, "medium": 0.05, "high": 0.2},
        description="base rate per risk tier (a tier not listed uses `medium`)",
    )
    finding: float = Field(1.0, ge=0, le=1, description="traces with any alerting finding")
    tool_error: float = Field(0.5, ge=0, le=1, description="traces with a failed tool call")
    long_trajectory: float = Field(0.5, ge=0, le=1, description="more tool calls than below")
    negative_feedback: float = Field(1.0, ge=0, le=1, description="user gave negative feedback")
    long_trajectory_tool_calls: PositiveInt = 10


class RealtimeConfig(BaseModel):
    """Where the plane reads and writes, how it assembles traces and where alerts go."""

    model_config = ConfigDict(extra="forbid")

    bootstrap_servers: str
    group_id: str = REALTIME_GROUP
    spans_topic: str = SPANS_TOPIC
    alerts_topic: str | None = ALERTS_TOPIC  # None: do not publish alerts to Kafka
    sampled_topic: str | None = SAMPLED_TOPIC  # None: do not publish samples
    quiet_window_s: PositiveFloat = 1.0
    max_age_s: PositiveFloat = 300.0
    max_traces: PositiveInt = 50_000
    max_spans: PositiveInt = 1_000_000
    recent_traces: PositiveInt = 10_000  # evaluated traces kept for late spans
    conversation_cache_size: PositiveInt = 10_000  # conversations kept for later turns
    conversation_turns: PositiveInt = 8  # earlier turns kept per conversation
    # Conversation turns shared with the other consumers of the group (None: each consumer
    # sees only the turns it evaluated), read from this far back when the plane starts.
    turns_topic: str | None = TURNS_TOPIC
    turns_lookback_s: PositiveFloat = 600.0
    policy_path: str | None = None  # YAML policy file; None = the default policy
    # At most one alert per window for a detector that cannot decide on a service's traces
    # (a coverage gap: realtime_plane.coverage).
    coverage_window_s: PositiveFloat = 3600.0
    webhook_url: str | None = None
    webhook_queue_size: PositiveInt = 10_000
    webhook_retries: int = Field(5, ge=0)
    webhook_timeout_s: PositiveFloat = 5.0
    sampler: SamplerRates = SamplerRates()
    session_timeout_ms: PositiveInt = 6000
    poll_timeout_ms: PositiveInt = 50
    # How long the broker may hold a fetch when it has too little data: it bounds how late
    # spans reach the plane on brokers that hold fetches that long (bench/fetch_wait.py:
    # p99 lag 0.27-1.2 s at kafka-python's 500 ms default, ~0.07 s at 100 ms, for 1.5-3%
    # of a core more per consumer at 1,000 messages/s).
    fetch_max_wait_ms: PositiveInt = 100
