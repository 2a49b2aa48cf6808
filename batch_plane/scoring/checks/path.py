"""Checks on the path as a whole: it terminated on a final answer, it kept within budgets,
the given detectors stayed quiet (a regression item's lesson).

Each runs the production detector that decides the question (PG113, PG114) with the
item's params, or reads the findings of the policy's detectors on the attempt's trace.
"""

from __future__ import annotations

from pathgrade.batch_plane.scoring.checks.fixtures import FixtureAttempt
from pathgrade.batch_plane.scoring.checks.registry import (
    AttemptEvidence,
    Check,
    CheckOutcome,
    CheckParams,
    Fixture,
    detect,
    from_findings,
)
from pathgrade.detectors.completeness import BUDGET, TERMINATION, BudgetParams, TerminationParams
from pathgrade.detectors.policy import DetectorRef
from pydantic import Field

TERMINATED = Check(
    name="terminated",
    doc="The run ended on a final text answer, not on a step or token cap, an error of the "
    "root span or an answer-less stop (PG113 `no-clean-termination`: the same decision, "
    "from the trace). `cap_finish_reasons` are the finish reasons that mean a cap.",
    params=TerminationParams,
    passing=Fixture({}, FixtureAttempt(answer="Your order has shipped.")),
    failing=Fixture({}, FixtureAttempt(answer="Let me check the", finish_reason="length")),
)


@TERMINATED.register
def terminated(params: TerminationParams, evidence: AttemptEvidence) -> CheckOutcome:
    """PG113 with the item's cap finish reasons."""
    return from_findings(detect(TERMINATION, params, evidence))


BUDGETS = Check(
    name="budget",
    doc="The attempt kept within the item's budgets: `max_steps` (model calls), "
    "`max_tool_calls`, `max_tokens`, `max_cost_usd` (tokens x the versioned price table, "
    "never a cost the agent reports) and `max_latency_ms` (root span); unset budgets are "
    "not checked (PG114 `budget-exceeded` with the item's budgets; an unpriced model makes "
    "the cost budget undecided).",
    params=BudgetParams,
    passing=Fixture({"max_tool_calls": 2, "max_tokens": 500}, FixtureAttempt()),
    failing=Fixture(
        {"max_cost_usd": 0.0001, "max_latency_ms": 2000},
        FixtureAttempt(tokens=(4000, 800), latency_ms=3500),
    ),
)


@BUDGETS.register
def budget(params: BudgetParams, evidence: AttemptEvidence) -> CheckOutcome:
    """PG114 with the item's budgets."""
    return from_findings(detect(BUDGET, params, evidence))


class QuietParams(CheckParams):
    """Detector codes (or names) that must raise no violation on the attempt."""

    codes: list[DetectorRef] = Field(min_length=1)


DETECTORS_QUIET = Check(
    name="detectors_quiet",
    doc="None of the detectors in `codes` raised a violation on the attempt's trace, under "
    "the suite's policy (a regression item's `must_not_fire` lesson). A cannot-decide "
    "finding of one of them, or a code the policy does not enable, leaves the check "
    "undecided: it never passes silently.",
    params=QuietParams,
    passing=Fixture({"codes": ["PG113"]}, FixtureAttempt()),
    failing=Fixture({"codes": ["no-clean-termination"]}, FixtureAttempt(finish_reason="length")),
)


@DETECTORS_QUIET.register
def detectors_quiet(params: QuietParams, evidence: AttemptEvidence) -> CheckOutcome:
    """The policy's findings of these codes; disabled codes cannot decide."""
    codes = set(params.codes)
    fired = [f for f in evidence.findings if f.code in codes]
    violations = sorted({f.code for f in fired if f.kind == "violation"})
    if violations:
        return CheckOutcome.fail(
            "; ".join(
                f"{code} fired again: "
                + " ".join(f.reason for f in fired if f.code == code and f.kind == "violation")
                for code in violations
            )
        )
    disabled = sorted(codes - set(evidence.enabled))
    outcome = from_findings(fired)
    if disabled and outcome.passed:
        return CheckOutcome.undecided(f"{', '.join(disabled)} not enabled by the policy.")
    return outcome
