"""RealtimeConfig: every setting of the realtime plane, validated at the edge."""

from __future__ import annotations

from typing import Annotated

from pathgrade.schemas.topics import (
    ALERTS_TOPIC,
    LOGS_TOPIC,
    REALTIME_GROUP,
    SAMPLED_TOPIC,
    SPANS_TOPIC,
    TURNS_TOPIC,
)
from pathgrade.transport.message_auth import MESSAGE_KEY_HELP, MessageKeySetting
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class SamplerRates(BaseModel):
    """Sampling rates: a base rate per risk tier, and a rate per flag of a turn."""

    model_config = ConfigDict(extra="forbid")

    tiers: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(
        default={"low": 0.01, "medium": 0.05, "high": 0.2},
        description="base rate per risk tier (a tier not listed uses `medium`)",
    )
    finding: float = Field(1.0, ge=0, le=1, description="rate of turns with any alerting finding")
    tool_error: float = Field(0.5, ge=0, le=1, description="rate of turns with a failed tool call")
    long_trajectory: float = Field(
        0.5,
        ge=0,
        le=1,
        description="rate of turns with more tool calls than `long_trajectory_tool_calls`",
    )
    negative_feedback: float = Field(
        1.0, ge=0, le=1, description="rate of turns whose user gave negative feedback"
    )
    long_trajectory_tool_calls: PositiveInt = Field(
        10, description="tool calls beyond which a turn counts as a long trajectory"
    )


class RealtimeConfig(BaseModel):
    """Where the plane reads and writes, how it assembles traces and where alerts go."""

    model_config = ConfigDict(extra="forbid")

    bootstrap_servers: str = Field(description="Kafka bootstrap servers, HOST:PORT[,HOST:PORT]")
    group_id: str = Field(REALTIME_GROUP, description="consumer group")
    spans_topic: str = Field(SPANS_TOPIC, description="topic of spans read")
    logs_topic: str | None = Field(
        LOGS_TOPIC,
        description="topic of log records read with the spans, co-partitioned with them "
        "(`null`: spans only)",
    )
    alerts_topic: str | None = Field(
        ALERTS_TOPIC, description="alerts published (`null`: not to Kafka)"
    )
    sampled_topic: str | None = Field(SAMPLED_TOPIC, description="samples published (`null`: none)")
    quiet_window_s: PositiveFloat = Field(
        1.0,
        description="evaluate an agent turn this long after its last span (its top span "
        "seen; docs/realtime.md, Turns)",
    )
    parent_wait_s: PositiveFloat = Field(
        5.0,
        description="how long an agent turn whose outermost span's parent is local (span "
        "flags) and has not arrived waits for it (the OTel SDK exports every 5 s)",
    )
    max_age_s: PositiveFloat = Field(
        300.0,
        description="evaluate every turn of a trace this old, complete or not (`incomplete`)",
    )
    max_traces: PositiveInt = Field(
        50_000, description="traces held at most; beyond, the oldest's turns are evaluated early"
    )
    max_spans: PositiveInt = Field(
        1_000_000,
        description="spans held at most; beyond, the oldest traces' turns are evaluated early",
    )
    recent_traces: PositiveInt = Field(
        10_000, description="evaluated traces kept for late spans (and their alert keys)"
    )
    # bench/realtime_memory.py: a remembered span costs ~530 B in the realistic mix (its
    # message's ~360 B of encoded OTLP, and which span ids arrived when), ~107 MB at the
    # bound; kept as decoded spans it cost ~2.5 KB (docs/scale.md).
    recent_spans: PositiveInt = Field(
        200_000,
        description="spans and log records of those traces kept at most; beyond, the oldest "
        "traces are forgotten first (a late span of a forgotten trace is graded without "
        "its earlier spans)",
    )
    conversation_cache_size: PositiveInt = Field(
        10_000, description="conversations whose turn digests are kept"
    )
    conversation_turns: PositiveInt = Field(8, description="turn digests kept per conversation")
    turns_topic: str | None = Field(
        TURNS_TOPIC,
        description="topic of turn digests shared with the other consumers of the group "
        "(`null`: each consumer sees only the turns it evaluated)",
    )
    turns_lookback_s: PositiveFloat = Field(
        600.0, description="how far back a starting consumer reads the turns topic"
    )
    policy_path: str | None = Field(
        None, description="detector policy YAML (docs/detectors.md); none: the default policy"
    )
    coverage_window_s: PositiveFloat = Field(
        3600.0,
        description="at most one coverage-gap alert per (tenant, service, detector) per "
        "window of this many seconds (Coverage, below)",
    )
    webhook_url: str | None = Field(None, description="POST each alert here as JSON")
    webhook_queue_size: PositiveInt = Field(
        10_000,
        description="alerts queued for the webhook; beyond, the oldest are dropped (counted)",
    )
    webhook_retries: int = Field(
        5, ge=0, description="retries of a failed POST (backoff with jitter)"
    )
    webhook_timeout_s: PositiveFloat = Field(5.0, description="timeout of one POST")
    sampler: SamplerRates = Field(
        default_factory=SamplerRates, description="which turns go to online scoring"
    )
    message_key: MessageKeySetting = Field(None, description=MESSAGE_KEY_HELP)
    session_timeout_ms: PositiveInt = Field(6000, description="consumer group session timeout")
    poll_timeout_ms: PositiveInt = Field(
        50,
        description="wait of one poll while alerts are held or turns are shared; while traces "
        "are held, until the first falls due, at least this and at most 500 ms; with nothing "
        "held, up to 500 ms (a poll returns as soon as a span arrives)",
    )
    # bench/fetch_wait.py: p99 lag 0.27-1.2 s at kafka-python's 500 ms default, ~0.07 s at
    # 100 ms, for 1.5-3% of a core more per consumer at 1,000 messages/s.
    fetch_max_wait_ms: PositiveInt = Field(
        100,
        description="longest the broker may hold a fetch for more data (a broker that holds "
        "it that long delays spans by up to this much)",
    )
    # bench/fetch_wait.py --idle: an idle consumer and its broker spend 0.040 of a core at
    # 100 ms, 0.013 at 500 (0.32x); a held fetch is answered when a record arrives (~5 ms).
    idle_fetch_wait_ms: int = Field(
        500,
        ge=1,
        le=10_000,
        description="the same once no record came for 5 s (an idle plane asks the broker "
        "twice a second, not ten times; the broker answers a held fetch when a record arrives)",
    )
