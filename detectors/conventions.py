"""How a deployment marks tool effects, session identity, idempotency keys and what users'
requests for writes look like: the policy's shared settings."""

from __future__ import annotations

from typing import Literal

from pathgrade.content.predicates import RequestPatterns
from pathgrade.schemas import genai
from pydantic import BaseModel, ConfigDict, Field, field_validator

ToolEffect = Literal["read", "write", "irreversible"]
WRITE_EFFECTS: frozenset[str] = frozenset({"write", "irreversible"})


class ToolEffects(BaseModel):
    """Tool names by effect; a tool not listed falls back to its span's `pathgrade.tool.effect`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reads: frozenset[str] = Field(frozenset(), description="tools that only read")
    writes: frozenset[str] = Field(frozenset(), description="tools that change something")
    irreversible: frozenset[str] = Field(
        frozenset(), description="tools whose change cannot be undone (refunds, deletions)"
    )

    def effect_of(self, tool_name: str, span_hint: object) -> ToolEffect | None:
        """The effect of `tool_name`: the policy's list first, then the span's hint, else None."""
        if tool_name in self.irreversible:
            return "irreversible"
        if tool_name in self.writes:
            return "write"
        if tool_name in self.reads:
            return "read"
        if span_hint in genai.TOOL_EFFECTS:
            return span_hint  # type: ignore[return-value]
        return None


class IdentityConfig(BaseModel):
    """Where the session identity lives and which tool arguments must match it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attribute: str = Field(
        genai.ENDUSER_ID,
        description="span attribute holding the session identity (on the turn's top span, "
        "else a span enclosing it, else any span of the turn; "
        "any span, or its fingerprint `pathgrade.facts.session.fp`)",
    )
    arguments: tuple[str, ...] = Field(
        ("account_id", "customer_id"),
        description="tool arguments that must name the session identity",
    )


class IdempotencyConfig(BaseModel):
    """Where a tool call's idempotency key lives: a span attribute or one of its arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attribute: str = Field(
        genai.PG_IDEMPOTENCY_KEY, description="tool span attribute holding the idempotency key"
    )
    arguments: tuple[str, ...] = Field(
        ("idempotency_key",), description="tool arguments read as the key when the span has none"
    )


def checked_requests(value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Validator body: every request pattern must compile (the error names the tool)."""
    RequestPatterns(value)
    return value


class Conventions(BaseModel):
    """The resolved shared settings every detector may read through `DetectorContext`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: ToolEffects = Field(ToolEffects(), description="tool names by effect")
    identity: IdentityConfig = Field(
        IdentityConfig(), description="where the session identity lives"
    )
    idempotency: IdempotencyConfig = Field(
        IdempotencyConfig(), description="where a tool call's idempotency key lives"
    )
    requests: dict[str, tuple[str, ...]] = Field(
        {},
        description="per write tool, regular expressions of a user's message that asks for "
        "it (matched case-insensitively on the turn's request: PG110)",
    )

    check_requests = field_validator("requests")(checked_requests)
