"""Sampler: which evaluated turns go to `pathgrade.sampled` for the batch plane, and why.

Base sampling is a deterministic hash of the turn (trace id and top span id) below the
tier's rate, so a lower rate samples a subset of what a higher rate samples, and every
consumer decides alike. Flagged turns (any alerting finding, a failed tool call, a long
trajectory, negative user feedback) are sampled at their own rates against the same hash.
"""

from __future__ import annotations

import hashlib

from pathgrade.realtime_plane.config import SamplerRates
from pathgrade.realtime_plane.evaluate import Evaluation
from pathgrade.schemas.genai import NEGATIVE_FEEDBACK, OP_EXECUTE_TOOL, PG_FEEDBACK
from pathgrade.schemas.model import Trace
from pathgrade.schemas.sampled import SampledTrace


def hash_unit(trace_id: str, turn_span_id: str = "") -> float:
    """A uniform number in [0, 1) fixed by the trace id and the turn's top span id."""
    key = f"{trace_id}:{turn_span_id}" if turn_span_id else trace_id
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _negative(value: object) -> bool:
    """A `pathgrade.feedback` value that says the user was unhappy."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value < 0
    return isinstance(value, str) and value.lower() in NEGATIVE_FEEDBACK


def _flags(trace: Trace, rates: SamplerRates) -> dict[str, float]:
    """The turn's flags (besides findings) and their rates."""
    tools = list(trace.by_operation(OP_EXECUTE_TOOL))
    flags = {}
    if any(s.status_code == "Error" or s.genai.error_type for s in tools):
        flags["tool_error"] = rates.tool_error
    if len(tools) > rates.long_trajectory_tool_calls:
        flags["long_trajectory"] = rates.long_trajectory
    feedback = (s.attributes.get(PG_FEEDBACK) for s in trace.own_spans() + trace.spans)
    if any(_negative(value) for value in feedback if value is not None):
        flags["negative_feedback"] = rates.negative_feedback
    return flags


class Sampler:
    """Decides per evaluated turn; None when it is not sampled."""

    def __init__(self, rates: SamplerRates) -> None:
        self.rates = rates

    def decide(self, evaluation: Evaluation, now_ns: int) -> SampledTrace | None:
        trace = evaluation.due.turn
        unit = hash_unit(trace.trace_id, trace.top_span_id)
        base = self.rates.tiers.get(evaluation.risk_tier, self.rates.tiers.get("medium", 0.0))
        candidates = {"base_rate": base}
        for code in sorted({f.code for f in evaluation.findings}):
            candidates[f"finding:{code}"] = self.rates.finding
        candidates.update(_flags(trace, self.rates))
        reasons = [reason for reason, rate in candidates.items() if unit < rate]
        if not reasons:
            return None
        return SampledTrace(
            trace_id=trace.trace_id, tenant=trace.tenant, service=evaluation.service,
            agent=evaluation.agent, risk_tier=evaluation.risk_tier, reasons=reasons,
            conversation_id=evaluation.conversation_id, sampled_at_ns=now_ns,
            turn_span_id=trace.top_span_id,
        )  # fmt: skip
