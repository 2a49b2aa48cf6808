"""How a deployment marks tool effects and session identity: the policy's shared settings."""

from __future__ import annotations

from typing import Literal

from pathgrade.schemas import genai
from pydantic import BaseModel, ConfigDict

ToolEffect = Literal["read", "write", "irreversible"]
WRITE_EFFECTS: frozenset[str] = frozenset({"write", "irreversible"})


class ToolEffects(BaseModel):
    """Tool names by effect; a tool not listed falls back to its span's `pathgrade.tool.effect`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()
    irreversible: frozenset[str] = frozenset()

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

    attribute: str = genai.ENDUSER_ID
    arguments: tuple[str, ...] = ("account_id", "customer_id")


class IdempotencyConfig(BaseModel):
    """Where a tool call's idempotency key lives: a span attribute or one of its arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attribute: str = genai.PG_IDEMPOTENCY_KEY
    arguments: tuple[str, ...] = ("idempotency_key",)


class Conventions(BaseModel):
    """The resolved shared settings every detector may read through `DetectorContext`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: ToolEffects = ToolEffects()
    identity: IdentityConfig = IdentityConfig()
    idempotency: IdempotencyConfig = IdempotencyConfig()
