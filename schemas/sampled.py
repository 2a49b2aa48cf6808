"""SampledTrace: one JSON document on topic `pathgrade.sampled`, read by the batch plane:
one agent turn of a trace (`content.agent_turns`) picked for online scoring."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SampledTrace(BaseModel):
    """A turn the realtime sampler picked for batch scoring (its trace, and its top span
    `turn_span_id`; "" from older writers: the whole trace), and why.

    `reasons` holds "base_rate", "finding:<code>" (e.g. "finding:PG110"), "tool_error",
    "long_trajectory" or "negative_feedback"; a turn sampled for several reasons lists
    them all.
    """

    model_config = ConfigDict(frozen=True)

    schema_version: int = 1
    trace_id: str
    tenant: str
    service: str
    agent: str
    risk_tier: str
    reasons: list[str]
    conversation_id: str
    sampled_at_ns: int
    turn_span_id: str = ""

    def to_json(self) -> bytes:
        """The wire form: UTF-8 JSON."""
        return self.model_dump_json().encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> SampledTrace:
        """Parse the wire form; raises pydantic.ValidationError naming the bad field."""
        return cls.model_validate_json(data)
