"""Deterministic detectors: pure functions (trace, params) -> findings, with stable codes.

Importing the package registers every detector family (the modules below) in `REGISTRY`.
May import `schemas` and `content` only; never a plane, `transport` or `pathgrade`.
"""

from pathgrade.detectors import (  # noqa: F401  (register)
    completeness,
    graph_adherence,
    handoffs,
    output,
    side_effects,
    tool_calls,
)
from pathgrade.detectors.finding import Finding, finding_key
from pathgrade.detectors.policy import (
    Policy,
    PolicyError,
    ResolvedPolicy,
    default_policy,
    load_policy,
)
from pathgrade.detectors.prices import PriceTable, cost_usd, load_price_table
from pathgrade.detectors.registry import REGISTRY, Rule
from pathgrade.detectors.run import run_detectors
from pathgrade.detectors.view import DetectorContext, TraceView, turn_digest

__all__ = [
    "REGISTRY",
    "DetectorContext",
    "Finding",
    "Policy",
    "PolicyError",
    "PriceTable",
    "ResolvedPolicy",
    "Rule",
    "TraceView",
    "cost_usd",
    "default_policy",
    "finding_key",
    "load_policy",
    "load_price_table",
    "run_detectors",
    "turn_digest",
]
